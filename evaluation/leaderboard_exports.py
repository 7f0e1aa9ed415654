"""A leaderboard (evaluation.leaderboard) as the files a paper needs: CSV (one row per run, each
measure with its standard error and Judged@k beside it, leave-one-out columns when computed)
and a LaTeX table (booktabs) with significance marks. Plain functions of the leaderboard's
dict, so the command, the API and the page export the same bytes."""

from __future__ import annotations

import csv
import io
import string


def run_letters(board: dict) -> dict[int, str]:
    """A letter per run (a, b, c, ... in the order the runs were named): the significance marks."""
    letters = string.ascii_lowercase
    return {run_id: letters[index % 26] * (index // 26 + 1) for index, run_id in enumerate(board["runs"])}


def significance_marks(board: dict, alpha: float | None = None) -> dict[str, dict[int, list[str]]]:
    """metric -> run id -> the letters of the runs it beats significantly: a higher mean and a
    Holm-corrected permutation p-value below `alpha` (default the board's `significance`)."""
    alpha = board["significance"] if alpha is None else alpha
    letters = run_letters(board)
    marks = {name: {run_id: [] for run_id in board["runs"]} for name in board["metrics"]}
    for test in board["tests"]:
        if test["holm_pvalue"] >= alpha or test["difference"] == 0:
            continue
        winner, loser = (test["a"], test["b"]) if test["difference"] > 0 else (test["b"], test["a"])
        marks[test["metric"]][winner].append(letters[loser])
    for by_run in marks.values():
        for found in by_run.values():
            found.sort()
    return marks


def best_means(board: dict) -> dict[str, float]:
    """metric -> the best run's mean (bold in the table)."""
    return {name: max(entry["metrics"][name] for entry in board["runs"].values()) for name in board["metrics"]}


def ranked_run_ids(board: dict) -> list[int]:
    """Runs in the order of the first measure's ranking."""
    return board["ranking"][board["metrics"][0]]


def _number(value) -> str:
    return "" if value is None else repr(float(value))


def leaderboard_csv(board: dict) -> str:
    """One header row and one row per run (best first by the first measure): rank, run id,
    name, then per measure its mean, standard error and the Judged@k beside it; with
    leave-one-out each measure's leave-one-out mean and rank change, and the run's removed pairs."""
    loo = board.get("leave_one_out")
    header = ["rank", "run", "name"]
    for name in board["metrics"]:
        header += [name, f"{name} stderr", f"Judged@{board['judged_at'][name]} ({name})"]
        if loo:
            header += [f"{name} leave-one-out", f"{name} rank change"]
    if loo:
        header.append("removed pairs")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for rank, run_id in enumerate(ranked_run_ids(board), 1):
        entry = board["runs"][run_id]
        row = [rank, run_id, entry["name"]]
        for name in board["metrics"]:
            row += [
                _number(entry["metrics"][name]),
                _number(entry["stderr"][name]),
                _number(entry["judged"][board["judged_at"][name]]),
            ]
            if loo:
                row += [_number(loo[run_id]["metrics"][name]), loo[run_id]["rank_change"][name]]
        if loo:
            row.append(loo[run_id]["removed_pairs"])
        writer.writerow(row)
    return out.getvalue()


LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIALS.get(character, character) for character in str(text))


def leaderboard_latex(board: dict, digits: int = 3) -> str:
    """A booktabs table: one row per run (best first by the first measure), each measure's mean
    with its standard error, the best mean of each column in bold, superscript letters for the
    runs it beats significantly, and one Judged@k column per depth the measures read."""
    letters = run_letters(board)
    marks = significance_marks(board)
    judged_keys = list(dict.fromkeys(board["judged_at"][name] for name in board["metrics"]))
    best = best_means(board)

    def cell(run_id: int, name: str) -> str:
        entry = board["runs"][run_id]
        value, stderr = entry["metrics"][name], entry["stderr"][name]
        text = f"{value:.{digits}f}"
        if value == best[name]:
            text = rf"\textbf{{{text}}}"
        if marks[name][run_id]:
            text += rf"$^{{{''.join(marks[name][run_id])}}}$"
        if stderr is not None:
            text += rf"\,{{\scriptsize$\pm${stderr:.{digits}f}}}"
        return text

    columns = "ll" + "r" * (len(board["metrics"]) + len(judged_keys))
    header = ["", "Run", *(latex_escape(name) for name in board["metrics"]), *(f"Judged@{key}" for key in judged_keys)]
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{Runs on {latex_escape(board['collection'])} under {latex_escape(board['qrels_label'])}: "
        rf"mean over {board['queries']} queries $\pm$ standard error. A superscript letter marks a significant "
        rf"improvement over the run of that letter (paired permutation test, Holm-corrected $p < "
        rf"{board['significance']:g}$); the best mean per column is in bold. Judged@k: the share of each "
        r"run's top $k$ that is judged (unjudged passages count as not relevant).}",
        r"\label{tab:leaderboard}",
        rf"\begin{{tabular}}{{{columns}}}",
        r"\toprule",
        " & ".join(header) + r" \\",
        r"\midrule",
    ]
    for run_id in ranked_run_ids(board):
        entry = board["runs"][run_id]
        cells = [letters[run_id], latex_escape(entry["name"])]
        cells += [cell(run_id, name) for name in board["metrics"]]
        cells += [f"{entry['judged'][key]:.2f}" for key in judged_keys]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)
