"""The DataLab on a checkpoint of BERT-base's exact size, beside the raw forward of the same model.

    python bench/datalab.py [--repeat N] [--keep FOLDER]

Builds a random BertForMaskedLM of BERT-base's configuration (110M parameters, vocabulary 30,522) with
transformers and saves it with save_pretrained, then prints, in one run:
  - the load time (config, safetensors weights, vocabulary) in the recipe;
  - the raw forward of the loaded model on a 12-token sentence (every position's logits), the same through
    transformers' BertForMaskedLM, and the DataLab trace of that sentence, with the ratio to the raw forward
    (goal: within 2x once loaded);
  - the DataLab through the API (a recipe worker behind the app; JSON in and out), first and warm (goal:
    within 1.5x the trace: the answer is written once, in the worker, and spliced into the response), and
    the recipe worker's resident memory;
  - What if? on the DataLab: one attention module zeroed on a text a moment after its lab run (the recipe
    process kept the run), and on a text never run, against the lab run's server time (goal: within 1.5x).
One torch thread throughout, as the server's recipe workers run.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SENTENCE = "the capital of france is [MASK] on the river ."  # 12 WordPiece tokens with [CLS] and [SEP]
WORDS = "the capital of france is on river . paris city".split()


def make_checkpoint(folder: Path) -> Path:
    """BERT-base's configuration with random weights, and a vocabulary of 30,522 entries in BERT's layout."""
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    vocab += [f"w{i}" for i in range(30522 - len(vocab))]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    torch.manual_seed(0)
    transformers.BertForMaskedLM(transformers.BertConfig()).eval().save_pretrained(folder)
    return folder


def median_ms(action, repeat: int) -> float:
    action()  # the first call pays for lazy initialisation
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def in_process(folder: Path, repeat: int) -> dict:
    import torch
    import transformers

    from app.compute.worker import encoded
    from app.domain.recipes import load_module

    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    lab = load_module(ROOT / "recipes" / "bert-base", "lab")
    start = time.perf_counter()
    loaded = lab.load(str(folder))
    load_s = time.perf_counter() - start
    _, ids = lab.tokenize(loaded.vocabulary, SENTENCE, 512)
    assert len(ids) == 12, ids
    input_ids = torch.tensor([ids])
    with torch.no_grad():
        raw = median_ms(lambda: loaded.model(input_ids), repeat)
        reference = transformers.BertForMaskedLM.from_pretrained(folder).eval()
        hf = median_ms(lambda: reference(input_ids=input_ids), repeat)
    datalab = median_ms(lambda: lab.datalab(str(folder), SENTENCE, 10), repeat)
    # as the worker writes it
    serialised = median_ms(lambda: encoded(lab.datalab(str(folder), SENTENCE, 10), {}, 0.0), repeat)
    return {"load_s": load_s, "raw_ms": raw, "transformers_ms": hf, "datalab_ms": datalab,
            "datalab_json_ms": serialised}


def rss_mib(pid: int) -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def through_the_api(folder: Path, repeat: int) -> dict:
    from app import create_app
    from app.services.parts import parts

    # Runs kept in this process alone: a shared runs folder would hold an earlier bench's runs of a kept checkpoint.
    app = create_app({"BERT_CHECKPOINT": str(folder), "STATE_PATH": None, "COMPUTE_BUDGET": "100000 per minute",
                      "SHARED_RUNS_DIR": None})
    client = app.test_client()

    def post(top_k: int) -> float:  # a new top_k each time: never a cached answer
        start = time.perf_counter()
        response = client.post("/api/models/bert-base/datalab", json={"text": SENTENCE, "top_k": top_k})
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["cached"] is False
        return time.perf_counter() - start

    first = post(1)
    warm = statistics.median(post(k) for k in range(2, repeat + 2)) * 1000
    start = time.perf_counter()
    assert client.post("/api/models/bert-base/datalab", json={"text": SENTENCE, "top_k": 2}).get_json()["cached"]
    cached = (time.perf_counter() - start) * 1000
    size = len(client.post("/api/models/bert-base/datalab", json={"text": SENTENCE, "top_k": 2}).data)
    changes = what_if(client, repeat)
    pid = parts(app).pool.pids()[0]
    rss, peak = rss_mib(pid)
    parts(app).pool.shutdown()
    return {"first_s": first, "warm_ms": warm, "cached_ms": cached, "answer_bytes": size,
            "worker_rss_mib": rss, "worker_peak_mib": peak, **changes}


def what_if(client, repeat: int, pause: float = 0.3) -> dict:
    """What if? on the DataLab as a reader asks it: a text run in the lab, its What if? options (which run the text
    as asked and keep it), then, a moment later, one attention module zeroed on it (`kept`: the changed run alone),
    and the same change to a text never run (`first`); medians of the server times, each request after `pause`
    idle."""
    change = [{"node": "layers.5.attention", "action": "zero"}]
    times: dict[str, list[float]] = {"lab_ms": [], "kept_ms": [], "first_ms": []}

    def post(url: str, body: dict, kept: list[float]) -> dict:
        time.sleep(pause)
        start = time.perf_counter()
        response = client.post(url, json=body)
        kept.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    for top_k in range(41, 41 + min(repeat, 29)):  # a new top_k each round (of 1..100): a new input, none cached
        asked = post("/api/models/bert-base/datalab", {"text": SENTENCE, "top_k": top_k}, times["lab_ms"])["request"]
        post("/api/models/bert-base/interventions/options", {"request": asked, "endpoint": "datalab"}, [])
        answer = post("/api/models/bert-base/interventions", {"request": asked, "endpoint": "datalab",
                                                              "interventions": change}, times["kept_ms"])
        assert answer["plain_run_cached"], "the lab run was not kept"
        unseen = {"text": SENTENCE, "top_k": top_k + 30}
        answer = post("/api/models/bert-base/interventions", {"request": unseen, "endpoint": "datalab",
                                                              "interventions": change}, times["first_ms"])
        assert not answer["plain_run_cached"]
    return {name: statistics.median(values) for name, values in times.items()}


def on_a_checkpoint(description: str, name: str, make, local, api) -> tuple[dict, dict, int]:
    """A benchmark's run: --repeat and --keep read, the random checkpoint `name` built with `make(folder)` (or the
    kept one reused), then `local(folder, repeat)` in the recipe process and `api(folder, repeat)` through the app;
    their figures and the repeat."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--keep", type=Path,
                        help="Build the checkpoint here (or reuse it) instead of a temporary folder.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tensorviz-bench-") as scratch:
        folder = args.keep or Path(scratch) / "checkpoint"
        if not (folder / "model.safetensors").is_file():
            start = time.perf_counter()
            make(folder)
            print(f"built a random {name} checkpoint in {time.perf_counter() - start:.1f} s "
                  f"({(folder / 'model.safetensors').stat().st_size / 2**20:.0f} MiB of safetensors)")
        return local(folder, args.repeat), api(folder, args.repeat), args.repeat


def main() -> None:
    local, api, repeat = on_a_checkpoint(__doc__.splitlines()[0], "BERT-base", make_checkpoint, in_process,
                                         through_the_api)
    ratio = local["datalab_ms"] / local["raw_ms"]
    print(f"12-token sentence, one torch thread, medians of {repeat}")
    print(f"  load (config, weights, vocabulary)    {local['load_s']:8.2f} s")
    print(f"  raw forward, this recipe              {local['raw_ms']:8.1f} ms   1.00x")
    print(f"  raw forward, transformers             {local['transformers_ms']:8.1f} ms   "
          f"{local['transformers_ms'] / local['raw_ms']:.2f}x")
    print(f"  DataLab trace                         {local['datalab_ms']:8.1f} ms   {ratio:.2f}x   "
          f"(goal: within 2x: {'met' if ratio <= 2 else 'NOT met'})")
    print(f"  DataLab trace + JSON                  {local['datalab_json_ms']:8.1f} ms   "
          f"{local['datalab_json_ms'] / local['raw_ms']:.2f}x")
    print("through the API (recipe worker, JSON in and out)")
    print(f"  first request (worker start + load)   {api['first_s']:8.2f} s")
    over_trace = api["warm_ms"] / local["datalab_ms"]
    print(f"  warm, not cached                      {api['warm_ms']:8.1f} ms   "
          f"{api['warm_ms'] / local['raw_ms']:.2f}x, {over_trace:.2f}x the trace "
          f"(goal: within 1.5x: {'met' if over_trace <= 1.5 else 'NOT met'})")
    print(f"  cached                                {api['cached_ms']:8.1f} ms")
    print(f"  answer size                           {api['answer_bytes'] / 1024:8.0f} KiB")
    print(f"  recipe worker memory                  {api['worker_rss_mib']:8.0f} MiB resident, "
          f"{api['worker_peak_mib']:.0f} MiB peak")
    print("What if? through the API, each request after 0.3 s idle (goal: a change within 1.5x the lab run)")
    print(f"  the lab run                           {api['lab_ms']:8.1f} ms   1.00x")
    kept = api["kept_ms"] / api["lab_ms"]
    print(f"  a change to it, after its options     {api['kept_ms']:8.1f} ms   {kept:.2f}x "
          f"(goal: {'met' if kept <= 1.5 else 'NOT met'})")
    print(f"  a change to a text never run          {api['first_ms']:8.1f} ms   {api['first_ms'] / api['lab_ms']:.2f}x "
          f"(runs the text twice)")


if __name__ == "__main__":
    main()
