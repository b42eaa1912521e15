from pipeline import html


def test_fmt_ms_switches_to_seconds_at_ten_seconds_with_grouping() -> None:
    assert html.fmt_ms(None) == "-"
    assert html.fmt_ms(9_999) == "9,999 ms"
    assert html.fmt_ms(12_345) == "12.3 s"


def test_esc_quotes_markup_and_renders_none_as_empty() -> None:
    assert html.esc(None) == ""
    assert html.esc('<t&"x">') == "&lt;t&amp;&quot;x&quot;&gt;"
