"""``eugo.hpc.readiness()``: before a run, whether distributing it with ``map`` will pay.

- :mod:`.measure`: a few items measured on the cluster, and what ``map`` costs there;
- :mod:`.model`: the predicted ``map`` run from those numbers (pure);
- :mod:`.report`: the verdict and checklist, as HTML, text and data (pure).
"""
