from pipeline import html


def test_fmt_ms_switches_to_seconds_at_ten_seconds_with_grouping() -> None:
    assert html.fmt_ms(None) == "-"
    assert html.fmt_ms(9_999) == "9,999 ms"
    assert html.fmt_ms(12_345) == "12.3 s"


def test_esc_quotes_markup_and_renders_none_as_empty() -> None:
    assert html.esc(None) == ""
    assert html.esc('<t&"x">') == "&lt;t&amp;&quot;x&quot;&gt;"


def test_the_histogram_marks_percentiles_of_the_values_in_order() -> None:
    """Nearest-rank percentiles of the values sorted, whatever order they came in: of
    1..100 shuffled, p50 is 50, p90 90, p99 99."""
    values = [float(v) for v in range(100, 0, -1)]
    svg = html.histogram_svg(values, "takeover")
    assert "<title>p50 50 ms</title>" in svg
    assert "<title>p90 90 ms</title>" in svg
    assert "<title>p99 99 ms</title>" in svg


def test_the_timeline_legend_lists_the_brokers_in_order() -> None:
    """One legend entry a broker, by id, whatever order their tenures came in."""
    tenures = [(1, 7, 0, 100), (2, 3, 100, 200), (3, 11, 200, 300), (4, 3, 300, 400)]
    svg = html.timeline_svg(tenures, [])
    legend = [int(part.split("<")[0]) for part in svg.split(">broker ")[1:]]
    assert legend == [3, 7, 11]
