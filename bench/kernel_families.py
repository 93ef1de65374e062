"""Every recorded model verified through the API under each kernel family this processor runs, and the envelopes
its recording holds: what a reader's other processor would see, played here.

    python bench/kernel_families.py [--kernels native,avx2,portable] [SLUG ...]

For each family an app is made with RECIPE_KERNELS set (its recipe processes compute with those kernels) and every
model is verified with POST /api/models/<slug>/verifications. It prints, per model and family, the verdict, the
kernels torch ran, the verification's time, the values held to an envelope wider than float32's, the steps checked
one by one, and the worst share of its allowance any value used; then what each recording's envelopes hold.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app import create_app  # noqa: E402
from app.domain.envelopes import described  # noqa: E402
from app.services.config import Config  # noqa: E402
from app.services.parts import parts  # noqa: E402
from recipekit.kernels import available  # noqa: E402


def verified(client, slug: str) -> dict:
    answer = client.post(f"/api/models/{slug}/verifications")
    while answer.status_code == 202:
        time.sleep(0.1)
        job = client.get(answer.headers["Location"]).get_json()
        if job["state"] == "done":
            return job["report"]
    return answer.get_json()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", default=",".join(available()))
    parser.add_argument("slugs", nargs="*")
    args = parser.parse_args()
    failed = 0
    print(f"{'model':12} {'kernels':9} {'verdict':8} {'torch ran':9} {'seconds':>7} {'widened':>8} {'steps':>6} "
          f"{'worst share':>11}")
    for family in args.kernels.split(","):
        settings = {"RECIPE_KERNELS": family, "STATE_PATH": None, "VERIFY_WAIT": 0.0,
                    "COMPUTE_BUDGET": "100000 per minute"}
        app = create_app(type("Bench", (Config,), settings))
        try:
            with app.app_context():
                from app.services.extensions import models

                client = app.test_client()
                slugs = args.slugs or sorted(models.catalog.models)
                for slug in slugs:
                    started = time.perf_counter()
                    report = verified(client, slug)
                    seconds = time.perf_counter() - started
                    if "error" in report:  # refused: a model that has nothing to verify here says why
                        print(f"{slug:12} {family:9} refused  {report['error']['message'][:80]}")
                        continue
                    if report["status"] == "error":
                        print(f"{slug:12} {family:9} error    {report['message']}")
                        failed += 1
                        continue
                    failed += report["status"] != "passed"
                    summary = report["summary"]
                    worst = max((v["worst_ratio"] or 0 for c in report["cases"] for v in c["values"]
                                 if v.get("worst_ratio") is not None), default=0.0)
                    print(f"{slug:12} {family:9} {report['status']:8} {report['environment']['cpu_capability']:9} "
                          f"{seconds:7.2f} {summary.get('values_widened', 0):>4}/{summary['values']:<3} "
                          f"{summary.get('steps_checked', 0):>6} {worst:11.3f}")
                if family == args.kernels.split(",")[0]:
                    widest = {slug: described(models.get(slug).manifest) for slug in slugs}
                    cased = {slug for slug in slugs if models.get(slug).manifest["experiment"]["cases"]}
        finally:
            parts(app).pool.shutdown()
    print("\nEach recording's envelopes (amplified: rounding alone moved a value 10 times past float32's tolerance):")
    for slug, said in widest.items():
        if said is None:
            print(f"  {slug:12} no envelope: " + ("an original capture, measured by no recorder, held to float32's "
                                                 "tolerance" if slug in cased else "no recorded case"))
            continue
        amplified = "; ".join(f"{a['item']} ({a['case']}) moved {a['moved']:.2g}" for a in said["amplified"])
        print(f"  {slug:12} {said['widened']} of {said['values']} values widened; amplified: {amplified or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
