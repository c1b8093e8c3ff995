"""irscope's compiler side: the service (model, jobs, runner, sandbox, store, worker) and one package per compiler."""
