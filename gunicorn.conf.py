"""Production serving: `gunicorn -c gunicorn.conf.py wsgi:app` (settings overridable by environment)."""

import gc
import multiprocessing
import os

from app.compute.pool import start_worker_server
from app.services.config import Config
from app.services.parts import KEY
from app.services.warmup import warm_up
from app.web.pages import prerender

bind = os.environ.get("TENSORVIZ_BIND", "127.0.0.1:8000")
# Web workers stay lean (no torch); each owns its own small pool of recipe processes, so few workers
# with many threads: a thread waiting on a recipe run costs nothing, a worker costs a recipe process.
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() + 1))
worker_class = "gthread"
# More threads than a worker admits recipe runs (RECIPE_WORKERS + RECIPE_QUEUE), so reads always find one.
threads = int(os.environ.get("TENSORVIZ_THREADS", 8))
timeout = 60  # gthread workers report to the arbiter from their main loop, so long requests do not count
# A recycled or stopped worker finishes what it runs first: a recipe run may take RECIPE_TIMEOUT, so the
# arbiter waits that long and a little more before it kills the worker (and, with it, the run).
recipe_timeout = float(os.environ.get("TENSORVIZ_RECIPE_TIMEOUT", Config.RECIPE_TIMEOUT))
graceful_timeout = int(recipe_timeout) + 15
keepalive = int(float(os.environ.get("TENSORVIZ_KEEPALIVE_SECONDS", Config.KEEPALIVE_SECONDS)))  # see Config
# gunicorn believes X-Forwarded-Proto from loopback by default; believe it only where the app believes its
# proxies (TENSORVIZ_PROXY_FIX, how many are in front), so that one setting says whom to trust.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1") \
    if int(os.environ.get("TENSORVIZ_PROXY_FIX", Config.PROXY_FIX)) > 0 else ""
# Recycle workers now and then, staggered so they do not all restart together. Rarely: a recycled worker
# starts a new recipe process (a torch import, seconds of CPU), which under load costs more than it saves.
max_requests = 100_000
max_requests_jitter = 10_000
accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("TENSORVIZ_LOG_LEVEL", "info")
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s"'


def post_fork(server, worker) -> None:
    """Start the worker's recipe process server (a torch import) while the worker loads the app."""
    start_worker_server()


def post_worker_init(worker) -> None:
    """Start and warm the worker's recipe processes now, in the background, and render the model pages,
    rather than on the first requests."""
    if KEY in getattr(worker.wsgi, "extensions", {}):  # the benchmarks' baseline app runs here too
        warm_up(worker.wsgi)
        prerender(worker.wsgi)
    # The catalog loaded at start-up lives as long as the worker: keep the collector from walking its
    # objects again and again (full collections show as latency spikes under load).
    gc.freeze()
