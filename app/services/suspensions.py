"""Recipes suspended, told to every web process through the shared store: one whose process could not start
(its warm-up failed twice in a row: compute/pool.py) until its files change, and one a run of which hung (ran past
RECIPE_TIMEOUT and was killed) for RECIPE_SUSPEND_SECONDS. Every process lists its model as unavailable, with the
reason, and refuses its runs meanwhile, so that a hang in one process costs no other process's requests a wait."""

import time

from flask import Flask

from .parts import parts

KEY = "recipes-suspended"  # {slug: [the recipe's hash when suspended, why, until when (epoch seconds) or None]}
KEPT_SECONDS = 7 * 24 * 3600  # an entry names its recipe's hash: new files are never suspended by an old one
FOLLOW_FLOOR = 1.0  # seconds: the store is read at most this often, even where the catalog is loaded once


def suspend(app: Flask, folder: str, reason: str, seconds: float | None = None) -> None:
    """A recipe cannot start (the pool's word; `seconds` None: until its files change) or hung (for `seconds`): its
    model is suspended this and in every other process."""
    live = parts(app).catalog
    slug = folder.rstrip("/").rsplit("/", 1)[-1]
    model = live.current().models.get(slug)
    if model is None:
        return
    until = None if seconds is None else time.time() + seconds
    live.suspend(slug, reason, until)
    store = parts(app).store
    known = store.get(KEY) or {}
    store.set(KEY, {**known, slug: [model.recipe_sha256, reason, until]}, ttl=KEPT_SECONDS)


def hung(app: Flask, folder: str) -> None:
    """A run of this recipe ran past RECIPE_TIMEOUT and was stopped (whichever executor ran it): its model is
    suspended for RECIPE_SUSPEND_SECONDS, this, where this process's runs of it that wait are refused at once, and in
    every other process."""
    config = app.config
    reason = f"a run of it did not finish in {config['RECIPE_TIMEOUT']:g} s and was stopped"
    suspend(app, folder, reason, config["RECIPE_SUSPEND_SECONDS"])
    if parts(app).pool is not None:
        parts(app).pool.suspend(folder, reason, time.time() + config["RECIPE_SUSPEND_SECONDS"])


def follow(app: Flask, every: float) -> None:
    """Take in, at most once in `every` seconds, what the other processes suspended: the catalog lists those models
    as unavailable (while their files are those suspended, and their time lasts) and this process's recipe workers
    never warm them (or refuse their runs, while a hang's time lasts)."""
    this = parts(app)
    now = time.monotonic()
    if this.store is None or now - this.suspensions_checked < every:
        return
    this.suspensions_checked = now
    found = this.store.get(KEY)
    if not isinstance(found, dict):
        return
    for slug, (digest, reason, *rest) in found.items():
        until = rest[0] if rest else None
        model = this.catalog.current().models.get(slug)
        if model is None or model.recipe_sha256 != digest or until is not None and until <= time.time():
            continue
        this.catalog.suspend(slug, reason, until)
        if this.pool is not None:
            this.pool.suspend(str(model.recipe_dir), reason, until)
