"""irscope's compiler side: job model, pipelines, sandbox, worker, store and runner."""
