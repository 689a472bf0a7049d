from loadlint.api import check_source, suggest_for_call
from loadlint.hardware.detect import parse_target, resolve_profile
from loadlint.facts.resolve import UNKNOWN

PROFILE = resolve_profile(parse_target("cpus=8,gpus=1,memory=16,shm=8,platform=linux,python=3.12"))

SOURCE = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(ds, batch_size=32, shuffle=True, prefetch_factor=2)
other = DataLoader(ds, num_workers=args.workers)
model.cuda()
"""


def test_suggest_for_call_is_what_fix_writes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    # LL001's fix removes prefetch_factor; LL201 and LL202 add their keywords.
    assert suggest_for_call(str(script), 4, PROFILE) == {
        "dataset": UNKNOWN,
        "batch_size": 32,
        "shuffle": True,
        "num_workers": 7,
        "pin_memory": True,
    }


def test_suggest_for_call_measures_a_script_in_a_tests_folder_too(tmp_path):
    # check spares test files the LL2xx codes; a script the user asks verify to measure is not spared.
    (tmp_path / "tests").mkdir()
    script = tmp_path / "tests" / "train.py"
    script.write_text(SOURCE)
    assert suggest_for_call(str(script), 4, PROFILE)["num_workers"] == 7


def test_suggest_for_call_keeps_unresolved_values_unknown(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    suggestion = suggest_for_call(str(script), 5, PROFILE)
    assert suggestion["num_workers"] is UNKNOWN
    assert suggestion["pin_memory"] is True


def test_suggest_for_call_without_a_call_on_the_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SOURCE)
    assert suggest_for_call(str(script), 1, PROFILE) is None


def test_check_source_reports_with_the_given_profile():
    codes = [f.code for f in check_source(SOURCE, "train.py", profile=PROFILE)]
    assert codes == ["LL001", "LL201", "LL202", "LL202"]


def test_identifier_this_python_rejects_is_a_syntax_error():
    # U+2EBF0 (CJK Extension I) is newer than Python 3.11's Unicode tables:
    # libcst's tokenizer takes it, its node validation does not.
    source = "from torch.utils.data import DataLoader\n\U0002ebf0 = 1\nDataLoader(ds)\n"
    [finding] = check_source(source, "x.py", profile=PROFILE)
    assert (finding.code, finding.location.row, finding.location.column) == ("LL900", 2, 1)
    assert finding.message == "SyntaxError: Name '\\U0002ebf0' is not a valid identifier."
