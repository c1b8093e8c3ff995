"""The worker tier's side of the `Runner` interface: jobs go to Celery queues on a Redis broker,
and `irscope worker` processes on any machine take them (service/worker_daemon.py).

A task message carries a job id only; the job itself (request, status, stages) lives in the shared
store. That makes a message cheap to send again: a worker first claims the job in the store, and a
message for a job that another worker has, or that ended, does nothing. Messages are acknowledged
after the task (acks_late, one message per free worker thread), Redis keeps them on disk, and a
job whose worker died is sent again by the living workers (the store knows who had it), so
nothing is lost when a worker, the broker or the web server goes down.
"""
from __future__ import annotations

from celery import Celery

from compiler.errors import ErrorKind
from compiler.model import JobError
from service.routing import CPU_QUEUE
from service.store import Job, Store

TASK_NAME = "irscope.run_job"


def celery_app(broker_url: str, visibility_timeout_s: float = 3600) -> Celery:
    """The Celery application both sides use (the web sends, workers consume)."""
    app = Celery("irscope", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json", accept_content=["json"], task_ignore_result=True, result_backend=None,
        task_default_queue=CPU_QUEUE, task_create_missing_queues=True,
        task_acks_late=True, worker_prefetch_multiplier=1, task_reject_on_worker_lost=True,
        # A message a worker took and never acknowledged (it died) comes back after this long; by
        # then the store has long re-sent its job, so the late copy finds it claimed or ended.
        broker_transport_options={"visibility_timeout": visibility_timeout_s},
        broker_connection_retry_on_startup=True, broker_connection_max_retries=None,
        worker_hijack_root_logger=False, worker_send_task_events=False, task_send_sent_event=False,
        worker_enable_remote_control=False,
    )
    return app


def send(app: Celery, job_id: str, queue: str) -> None:
    app.send_task(TASK_NAME, args=[job_id], queue=queue, retry=True,
                  retry_policy={"max_retries": 10, "interval_start": 0, "interval_step": 0.2, "interval_max": 1})


class CeleryRunner:
    """Enqueues each job on its queue; runs nothing itself."""

    def __init__(self, store: Store, broker_url: str, lost_after_s: float):
        self.store = store
        self.app = celery_app(broker_url)
        self.lost_after_s = lost_after_s

    def submit(self, job: Job) -> None:
        try:
            send(self.app, job.id, job.queue or CPU_QUEUE)
        except Exception as e:  # noqa: BLE001 - a job without a message would wait forever
            error = JobError(ErrorKind.BrokerUnavailable, f"the job queue (the broker) could not be reached "
                                                          f"({type(e).__name__}: {e}); the job was not queued. Try "
                                                          "again in a minute")
            self.store.finish_job(job.id, error, {})

    def live_queues(self) -> dict[str, bool]:
        """The queues that live workers take jobs from, each with whether one of those workers
        has the queue's device (always true for `cpu`)."""
        out: dict[str, bool] = {}
        for w in self.store.live_workers(self.lost_after_s):
            for q in w.queues:
                has = q == CPU_QUEUE or bool(w.capabilities.get("queues", {}).get(q, {}).get("device"))
                out[q] = out.get(q, False) or has
        return out

    def start_background(self, languages: list[str], warm: bool) -> None:
        """Nothing: warm-up and spare workers belong to the workers."""

    def shutdown(self) -> None:
        self.app.pool.force_close_all()
