"""Recipes set aside because their process could not start (compute/pool.py), told to every web process through
the shared store: a recipe that hung twice in one web process is not tried again in the others, and every
process lists its model as unavailable, with the reason, until its files change."""

import time

from flask import Flask

from .parts import parts

KEY = "recipes-set-aside"  # {slug: [the recipe's hash when set aside, why]}
KEPT_SECONDS = 7 * 24 * 3600  # an entry names its recipe's hash: new files are never set aside by an old one
FOLLOW_FLOOR = 1.0  # seconds: the store is read at most this often, even where the catalog is loaded once


def set_aside(app: Flask, folder: str, reason: str) -> None:
    """The pool's word that a recipe cannot start: its model is set aside here and in every other process."""
    live = parts(app).catalog
    slug = folder.rstrip("/").rsplit("/", 1)[-1]
    model = live.current().models.get(slug)
    if model is None:
        return
    live.set_aside(slug, reason)
    store = parts(app).store
    known = store.get(KEY) or {}
    store.set(KEY, {**known, slug: [model.recipe_sha256, reason]}, ttl=KEPT_SECONDS)


def follow(app: Flask, every: float) -> None:
    """Take in, at most once in `every` seconds, what the other processes set aside: the catalog lists those models
    as unavailable (while their files are those set aside) and this process's recipe workers never warm them."""
    here = parts(app)
    now = time.monotonic()
    if here.store is None or now - here.aside_checked < every:
        return
    here.aside_checked = now
    found = here.store.get(KEY)
    if not isinstance(found, dict):
        return
    for slug, (digest, reason) in found.items():
        model = here.catalog.current().models.get(slug)
        if model is not None and model.recipe_sha256 == digest:
            here.catalog.set_aside(slug, reason)
            if here.pool is not None and hasattr(here.pool, "set_aside"):
                here.pool.set_aside(str(model.recipe_dir), reason)
