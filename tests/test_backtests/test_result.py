"""What ``Backtest(...).run()`` returns: a short summary to print, a notebook view, the statistics as a
Series, the equity with its times, an interactive chart saved offline, and the forward period chosen by
whether the EA studies."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from backtests import Backtest
from backtests.report import ReportFolderError, write_report
from datafeeds import read_sample
from datafeeds.synthetic import synthetic_candles
from strategies import ExpertAdvisor, FractalEA, SmaCrossEA


@pytest.fixture(scope="module")
def result():
    return Backtest(read_sample().iloc[:900], SmaCrossEA).run(sl_points=150, tp_points=300)


def test_repr_is_a_short_summary_not_the_tables(result):
    text = repr(result)
    lines = text.splitlines()
    assert len(lines) <= 40 and len(text) < 4000
    assert lines[0] == "<backtests.Result SmaCrossEA EURUSD H1, complete>"
    net = f"{result.stats['total_net_profit']:,.2f} USD"
    assert re.search(rf"Total Net Profit\s+{re.escape(net)}$", text, re.M)
    assert (
        f".trades ({len(result.trades)})" in text and "every bar (default: SmaCrossEA does not study" in text
    )


def test_repr_html_is_a_table_for_notebooks(result):
    page = result._repr_html_()
    assert page.startswith("<div class='neuronet-result'>") and "<table" in page and "<script" not in page
    assert f"{result.stats['total_trades']:,}" in page


def test_equity_is_a_frame_with_the_forward_bars_times(result):
    eq = result.equity
    assert isinstance(eq, pd.DataFrame) and isinstance(eq.index, pd.DatetimeIndex)
    assert eq.index.equals(result.time) and list(eq.columns[:2]) == ["equity", "balance"]
    assert eq["equity"].iloc[-1] == pytest.approx(result.stats["final_equity"])
    # drawdown from the running peak, the deposit included, recomputed by hand
    values = np.concatenate(([result.account["deposit"]], eq["equity"].to_numpy()))
    peak = np.maximum.accumulate(values)[1:]
    np.testing.assert_allclose(eq["drawdown_pct"], (peak - values[1:]) / peak * 100)
    assert (eq["equity_worst"] <= eq["equity"] + 1e-9).all()


def test_stats_is_a_series_with_report_keys(result):
    assert isinstance(result.stats, pd.Series) and result.stats.name == "SmaCrossEA"
    assert result.stats["total_trades"] == len(result.trades) > 0


def test_plot_saves_one_offline_file_with_every_trade_ticket(result, tmp_path):
    out = tmp_path / "chart.html"
    result.plot(out, show=False)
    page = out.read_text()
    assert not re.findall(r"<script[^>]*\ssrc=|<link\b", page)  # BokehJS inline: opens offline
    docs = json.loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S).group(1))
    text = json.dumps(docs)
    assert '"entries"' in text and '"exits"' in text and "#@ticket" in text


def test_the_default_forward_depends_on_whether_the_ea_studies():
    df = read_sample().iloc[:900]
    plain = Backtest(df, SmaCrossEA)
    assert plain.periods.forward_start == 0 or plain.periods.forward_start <= 1
    assert "does not study" in plain.forward_rule
    studies = Backtest(df, FractalEA)
    assert studies.periods.forward_start == 600 and "last third" in studies.forward_rule
    pinned = Backtest(df, SmaCrossEA, forward="1/3")
    assert pinned.periods.forward_start == 600 and pinned.forward_rule == "forward 1/3"

    class Studies(ExpertAdvisor):
        def on_study(self, bars):
            pass

    assert Backtest(df, Studies).periods.forward_start == 600


def test_write_report_refuses_a_folder_holding_other_files(result, tmp_path):
    folder = tmp_path / "rep"
    folder.mkdir()
    (folder / "model.nnz").write_bytes(b"another EA's network")
    with pytest.raises(ReportFolderError, match=r"not empty .*model\.nnz"):
        write_report(result, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["model.nnz"]  # nothing written
    write_report(result, folder, force=True)
    assert not (folder / "model.nnz").exists()  # the other run's model does not sit beside this report


def test_orders_and_deals_read_as_metatrader_prints_them(result, tmp_path):
    folder = write_report(result, tmp_path / "r").parent
    stamp = r"\d{4}\.\d\d\.\d\d \d\d:\d\d:\d\d"
    deals = pd.read_csv(folder / "deals.csv", dtype=str, keep_default_na=False)
    orders = pd.read_csv(folder / "orders.csv", dtype=str, keep_default_na=False)
    assert deals["time"].str.fullmatch(stamp).all() and orders["time_setup"].str.fullmatch(stamp).all()
    for col in ("profit", "commission", "swap"):
        assert deals[col].map(lambda v: len(v.partition(".")[2]) <= 2).all(), col
    got = pd.to_numeric(deals["profit"]).sum()
    assert got == pytest.approx(result.deals["profit"].sum(), abs=0.005 * len(deals))


def test_every_closing_order_and_its_deal_carry_a_ticket_of_the_accounts_numbering(result):
    """SL, TP and signal closes are the server's own orders: each has a ticket of the one numbering the
    opening orders and positions share, and the deal it made names it (as MetaTrader's history shows)."""
    orders, deals = result.orders, result.deals
    assert set(result.trades["exit_reason"]) >= {"sl", "tp"}
    assert orders["ticket"].notna().all() and orders["ticket"].is_unique
    assert deals["order"].notna().all()
    assert set(deals["order"]) <= set(orders["ticket"])
    closing = orders[orders["comment"].isin(["sl", "tp"])]
    assert len(closing) == result.trades["exit_reason"].isin(["sl", "tp"]).sum()
    outs = deals[deals["entry"] == "out"].set_index("order")
    assert (outs.loc[closing["ticket"], "position"].to_numpy() == closing["position"].to_numpy()).all()
    assert sorted(orders["ticket"]) == list(range(1, len(orders) + 1))  # no gap, no number used twice


def test_a_line_off_the_price_scale_gets_its_own_panel_not_the_candles_axis():
    from backtests.plots import split_indicators

    chart = {
        "low": np.array([1.07, 1.08]),
        "high": np.array([1.09, 1.10]),
        "indicators": {
            "sma": np.array([np.nan, 1.085]),
            "proba": np.array([0.2, 0.9]),
            "rsi": np.array([30, 70]),
        },
    }
    on_price, apart = split_indicators(chart)
    assert list(on_price) == ["sma"] and list(apart) == ["proba", "rsi"]


def test_text_from_the_ea_is_shown_as_text_in_every_page_not_run_as_html(tmp_path):
    """An order comment and a text input reach the Settings, the Orders and Deals tables and the chart's
    data: a page must show them, never run them."""
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"

    class Noisy(ExpertAdvisor):
        note = evil

        def on_bar(self):
            if not self.positions() and len(self.bars) % 50 == 0:
                self.buy(0.1, sl_points=100, tp_points=100, comment=self.note[:31])

    res = Backtest(read_sample().iloc[:400], Noisy).run()
    assert len(res.orders) and (res.orders["comment"] == evil[:31]).any()
    page = write_report(res, tmp_path / "r").read_text()
    chart = tmp_path / "chart.html"
    res.plot(chart, show=False)
    for text in (page, chart.read_text()):
        assert "<script>alert(1)" not in text and "<img src=x" not in text
    assert "note=&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the input, shown as written


def test_orders_and_deals_tables_are_built_on_first_read_from_the_finished_run(monkeypatch):
    from backtests.broker import ledger

    built = []
    for name in ("orders_frame", "deals_frame"):
        original = getattr(ledger.Ledger, name)
        monkeypatch.setattr(ledger.Ledger, name, lambda self, f=original, n=name: built.append(n) or f(self))
    res = Backtest(read_sample().iloc[:900], SmaCrossEA).run()
    assert built == []  # a run read only for its statistics builds neither table
    orders, deals = res.orders, res.deals
    assert built == ["orders_frame", "deals_frame"]
    assert res.orders is orders and res.deals is deals and built == ["orders_frame", "deals_frame"]
    assert len(deals) == 2 * len(res.trades) and deals["balance"].iloc[-1] == res.stats["final_balance"]
    assert (orders["state"] == "filled").all() and len(orders) == len(deals)


def test_a_result_given_no_orders_has_empty_tables_of_its_own(result):
    from dataclasses import MISSING, fields, replace

    from backtests.result import Result

    required = {f.name: getattr(result, f.name) for f in fields(Result) if f.default is MISSING
                and f.default_factory is MISSING}  # fmt: skip
    one, two = Result(**required), Result(**required)
    assert one.orders.empty and one.deals.empty and one.orders is not two.orders
    one.orders["x"] = [1]  # one result's table is its own
    assert two.orders.empty
    pd.testing.assert_frame_equal(replace(result).orders, result.orders)


def test_a_request_after_the_run_changes_no_table_of_its_result():
    res = Backtest(read_sample().iloc[:600], SmaCrossEA).run()
    ticket = res.ea_instance.buy(0.1)  # the EA kept with the result still reaches its broker
    assert ticket  # (accepted there: the tables must not show it)
    assert len(res.deals) == 2 * len(res.trades) == 2 * res.stats["total_trades"]
    assert (
        ticket not in set(res.orders["ticket"])
        and res.deals["balance"].iloc[-1] == res.stats["final_balance"]
    )


class _TradesInOnTester(ExpertAdvisor):
    """Opens one position during the run; then, in ``on_tester`` (after the end-of-test deals), a market
    order, a pending order and a refused order (more lots than the account can carry)."""

    def on_bar(self):
        if len(self.bars) == 5:
            self.buy(0.1)

    def on_tester(self, stats):
        self.buy(0.5)
        self.buy_limit(0.2, self.ask * 0.9)
        self.buy(90.0)  # 10019: not enough free margin
        return 1.0


class _TradesInOnTesterOnTwo(_TradesInOnTester):
    symbols = ("EURUSD", "GBPUSD")


@pytest.mark.parametrize("several", [False, True], ids=["one-symbol", "two-symbols"])
def test_requests_in_on_tester_change_no_table_of_the_result(several):
    """The run's tables are of its figures' records, whatever ``on_tester`` then asks: one position in and
    out (its end-of-test deal), no position left open after the end of the test, no order still placed,
    and no refusal made after the run, with one symbol as with several."""
    if several:
        candles = {s: synthetic_candles(s, "H1", 60, seed=i + 3) for i, s in enumerate(("EURUSD", "GBPUSD"))}
        res = Backtest(candles, _TradesInOnTesterOnTwo, forward=None).run()
    else:
        res = Backtest(read_sample().iloc[:60], _TradesInOnTester, forward=None).run()
    assert res.stats["total_trades"] == len(res.trades) == 1
    assert list(res.deals["entry"]) == ["in", "out"]
    assert list(res.orders["state"]) == ["filled", "filled"]
    assert res.deals["balance"].iloc[-1] == res.stats["final_balance"]
    assert res.rejected == []


def _everything(res) -> dict:
    """Every table, curve and chart column of a result, read now (the tables built on first read)."""
    out = {
        name: getattr(res, name).copy(deep=True)
        for name in ("trades", "orders", "deals", "equity", "curves", "equity_path")
    }
    out["stats"] = res.stats.copy()
    out["balance"] = np.array(res.balance)
    chart = res.chart_data
    out.update({f"chart {k}": np.array(v) for k, v in chart.items() if k != "indicators"})
    out.update({f"line {k}": np.array(v) for k, v in chart["indicators"].items()})
    return out


def test_a_results_tables_do_not_change_when_a_later_run_happens():
    # A result keeps views of the run's arrays (prices, indicator lines, curves); a later run of the same
    # Backtest, with other inputs and so other trades, must write none of them: the first result's tables,
    # those read before the later run and those first read after it, stay what a run alone gives.
    df = read_sample().iloc[:1500]
    bt = Backtest(df, SmaCrossEA)
    first = bt.run(sl_points=150, tp_points=300)
    early = {name: getattr(first, name).copy(deep=True) for name in ("trades", "equity")}
    early_lines = {k: np.array(v) for k, v in first.chart_data["indicators"].items()}
    later = bt.run(fast=5, slow=40, sl_points=80)
    alone = _everything(Backtest(df, SmaCrossEA).run(sl_points=150, tp_points=300))
    assert len(later.trades) != len(alone["trades"])  # the later run traded otherwise
    after = _everything(first)
    assert after.keys() == alone.keys()
    for name, value in alone.items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(after[name], value, check_exact=True)
        elif isinstance(value, pd.Series):
            pd.testing.assert_series_equal(after[name], value, check_exact=True)
        elif value is None:
            assert after[name] is None, name
        else:
            np.testing.assert_array_equal(after[name], value, err_msg=name, strict=True)
    for name in early:
        pd.testing.assert_frame_equal(getattr(first, name), early[name], check_exact=True)
    for k, v in early_lines.items():
        np.testing.assert_array_equal(first.chart_data["indicators"][k], v, strict=True)
    with pytest.raises(ValueError, match="read-only"):
        first.chart_data["indicators"][next(iter(early_lines))][0] = 0.0  # nobody writes the run's lines
