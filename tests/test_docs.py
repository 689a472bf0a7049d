import re
from pathlib import Path

from loadlint.output.docs import SECTIONS, pages, rule_table
from loadlint.rules import CODES, all_rules
from loadlint.rules.runtime import RUNTIME_CODES

ROOT = Path(__file__).resolve().parent.parent
RULES_DIR = ROOT / "rules"


def test_every_code_has_a_page_and_every_page_a_code():
    on_disk = {p.name for p in RULES_DIR.glob("LL*.md")}
    assert on_disk == {f"{code}.md" for code in (*CODES, *RUNTIME_CODES)}


def test_runtime_codes_are_not_static_rules():
    # loadlint trace reports them; the static engine must never select them.
    assert not set(RUNTIME_CODES) & set(CODES)
    for code, entry in RUNTIME_CODES.items():
        doc = entry.documentation()
        assert doc.startswith(f"# {entry.name} ({code})\n")
        positions = [doc.find(section) for section in SECTIONS]
        assert all(p > 0 for p in positions) and positions == sorted(positions), code


def test_pages_are_generated_from_docstrings():
    for name, text in pages().items():
        assert (RULES_DIR / name).read_text(encoding="utf-8") == text, f"{name} is stale: run python -m loadlint.output.docs"


def test_pages_have_ruffs_sections_in_order():
    for rule in all_rules():
        doc = rule.documentation()
        assert doc.startswith(f"# {rule.name} ({rule.code})\n")
        positions = [doc.find(section) for section in SECTIONS]
        assert all(p > 0 for p in positions), (rule.code, positions)
        assert positions == sorted(positions), rule.code


def test_registry_matches_rule_classes():
    for code, (name, _) in CODES.items():
        rule = next(r for r in all_rules() if r.code == code)
        assert rule.name == name
    names = [r.name for r in all_rules()]
    assert len(set(names)) == len(names)


def test_readme_rule_table_is_current():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert rule_table() in readme, "README rule table is stale: run python -m loadlint.output.docs"


def test_codes_are_well_formed():
    assert all(re.fullmatch(r"LL\d{3}", code) for code in CODES)


def test_the_rule_authors_guide_names_every_category():
    guide = (ROOT / "docs" / "rule-authors.md").read_text(encoding="utf-8")
    from loadlint.rules.categories import CATEGORIES

    assert all(f"`{key}`" in guide for key in CATEGORIES)
    assert "rule-authors.md" in (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
