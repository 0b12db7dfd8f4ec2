"""``eugo.hpc.profile()``: a recorded block and what it tells.

- :mod:`.run`: the ``profile()`` block and its :class:`~.run.Run`;
- :mod:`.recording`: what was submitted and fetched while it recorded (the run's model);
- :mod:`.worker`: the worker side, timing one call where it runs;
- :mod:`.report`: how a run is shown (statistics, findings, a timeline);
- :mod:`.findings`: a run's findings kept next to its cluster's record, for the panel.

The analysis itself (statistics and findings over the model) is :mod:`eugo_jupyter.hpc._insights`.
"""
