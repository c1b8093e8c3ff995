"""Every setting is documented, and docs/settings.md's table is the settings table."""
from service import settings


def test_docs_settings_table_matches_the_code():
    readme = open("docs/settings.md", encoding="utf-8").read()
    start, end = readme.index("<!-- settings:start -->"), readme.index("<!-- settings:end -->")
    assert readme[start:end].split("\n", 1)[1].strip() == settings.markdown_table()


def test_every_setting_has_help_and_loads_from_the_environment():
    for s in settings.SETTINGS:
        assert len(s.help) > 20, s.name
    values = settings.load(environ={"IRSCOPE_WORKERS": "5", "IRSCOPE_REUSE_RESULTS": "false",
                                    "IRSCOPE_DATA_DIR": "/tmp/somewhere"})
    assert values["workers"] == 5 and values["reuse_results"] is False
    assert values["database_url"] == "sqlite:////tmp/somewhere/irscope.db"


def test_unknown_setting_is_refused():
    import pytest
    with pytest.raises(KeyError, match="unknown setting 'wokers'"):
        settings.load({"wokers": 3}, environ={})
