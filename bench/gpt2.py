"""The GPT-2 DataLab on a checkpoint of gpt2 small's exact size, beside a bare forward of the same model.

    python bench/gpt2.py [--repeat N] [--keep FOLDER]

Builds a random GPT2LMHeadModel of gpt2 small's configuration (124M parameters, vocabulary 50,257, 1,024 positions)
with transformers and saves it with save_pretrained, beside a byte-level BPE trained on a few sentences, then prints,
in one run, with one torch thread as the server's recipe workers run:
  - the bare forward of the recipe's loaded model on a 14-token prompt, and transformers' own;
  - the trace in the recipe process (every head's attention, the residual stream, the logit lens, the top tokens);
  - the trace through the API (a recipe worker behind the app, JSON in and out, not cached), against the bare
    forward (goal: at most 1.5x);
  - patching every head, and the residual stream at every block and token, from a second prompt through the API.
"""

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.datalab import median_ms, on_a_checkpoint  # noqa: E402 (the project folder is on the path above)

PROMPT = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"


def make_checkpoint(folder: Path) -> Path:
    """gpt2 small's configuration with random weights, and a byte-level BPE of the test sentences."""
    import torch
    import transformers

    from tests.gpt2_checkpoints import make_checkpoint as small

    small(folder)  # the tokenizer files (and a small model, replaced below)
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(attn_implementation="eager")).eval().save_pretrained(folder)
    return folder


def in_process(folder: Path, repeat: int) -> dict:
    import torch
    import transformers

    from app.domain.recipes import load_module

    torch.set_num_threads(1)
    lab = load_module(ROOT / "recipes" / "gpt2", "lab")
    loaded = lab.load(str(folder))
    ids = torch.tensor([lab.tokenize(loaded, PROMPT)])
    with torch.no_grad():
        bare = median_ms(lambda: loaded.model(ids), repeat)
        reference = transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()
        hf = median_ms(lambda: reference(input_ids=ids), repeat)
    trace = median_ms(lambda: lab.trace(str(folder), PROMPT), repeat)
    return {"tokens": ids.size(1), "bare_ms": bare, "transformers_ms": hf, "trace_ms": trace}


def through_the_api(folder: Path, repeat: int) -> dict:
    from app import create_app
    from app.services.parts import parts

    app = create_app({"GPT2_CHECKPOINT": str(folder), "STATE_PATH": None, "COMPUTE_BUDGET": "100000 per minute",
                      "RECIPE_MEMORY_MB": 4096})
    client = app.test_client()

    def post(path: str, body: dict) -> float:
        start = time.perf_counter()
        response = client.post(f"/api/models/gpt2/{path}", json=body)
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["cached"] is False
        return (time.perf_counter() - start) * 1000

    first = post("trace", {"prompt": PROMPT, "top_k": 1}) / 1000
    warm = statistics.median(post("trace", {"prompt": PROMPT, "top_k": k}) for k in range(2, repeat + 2))
    size = len(client.post("/api/models/gpt2/trace", json={"prompt": PROMPT, "top_k": 2}).data)
    patching = post("patching", {"prompt": PROMPT, "corrupted": CORRUPTED})
    parts(app).pool.shutdown()
    return {"first_s": first, "warm_ms": warm, "answer_bytes": size, "patching_ms": patching}


def main() -> None:
    local, api, repeat = on_a_checkpoint(__doc__.splitlines()[0], "gpt2-small", make_checkpoint, in_process,
                                         through_the_api)
    bare = local["bare_ms"]
    ratio = api["warm_ms"] / bare
    print(f"{local['tokens']}-token prompt, one torch thread, medians of {repeat}")
    print(f"  bare forward, this recipe             {bare:8.1f} ms   1.00x")
    print(f"  bare forward, transformers            {local['transformers_ms']:8.1f} ms   "
          f"{local['transformers_ms'] / bare:.2f}x")
    print(f"  trace in the recipe process           {local['trace_ms']:8.1f} ms   {local['trace_ms'] / bare:.2f}x")
    print("through the API (recipe worker, JSON in and out, not cached)")
    print(f"  first request (worker start + load)   {api['first_s']:8.2f} s")
    print(f"  trace, warm                           {api['warm_ms']:8.1f} ms   {ratio:.2f}x   "
          f"(goal: at most 1.5x: {'met' if ratio <= 1.5 else 'NOT met'}); "
          f"{api['answer_bytes'] / 1024:,.0f} KiB of JSON")
    print(f"  patching: every head, the stream at every block and token  {api['patching_ms']:8.1f} ms   "
          f"{api['patching_ms'] / bare:.1f}x")


if __name__ == "__main__":
    main()
