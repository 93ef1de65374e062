"""Production serving: `gunicorn -c gunicorn.conf.py wsgi:app` (settings overridable by environment)."""

import multiprocessing
import os

bind = os.environ.get("TENSORVIZ_BIND", "127.0.0.1:8000")
# Web workers stay lean (no torch); each owns its own small pool of recipe processes, so few workers
# with many threads: a thread waiting on a recipe run costs nothing, a worker costs a recipe process.
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() + 1))
worker_class = "gthread"
# More threads than a worker admits recipe runs (RECIPE_WORKERS + RECIPE_QUEUE), so reads always find one.
threads = int(os.environ.get("TENSORVIZ_THREADS", 8))
timeout = 60  # a web request never waits this long: recipe runs have their own, shorter timeout
graceful_timeout = 30
keepalive = 5
max_requests = 2000  # recycle workers now and then, staggered so they do not all restart together
max_requests_jitter = 200
accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("TENSORVIZ_LOG_LEVEL", "info")
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s"'


def post_worker_init(worker) -> None:
    """Start the worker's recipe processes now, in the background, rather than on the first request."""
    pool = getattr(worker.wsgi, "extensions", {}).get("tensorviz.pool")
    if pool is not None:  # the benchmarks' baseline app runs under this config too
        pool.prestart()
