"""pandas' own tests with the calls the ``.eugo`` accessors support routed to them (see .plugin)."""
