"""What the tests and the benchmarks share: real servers started as processes of their own
(`real_servers`) and jobs run in a process as the worker runs them (`bundle_jobs`). Installed with
irscope (pyproject.toml), so a benchmark imports it as it imports irscope, with no path of its own."""
