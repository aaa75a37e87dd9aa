"""``ckptdiff --help``: the options in groups (click has no groups of its own), examples, and where the manual is."""

from __future__ import annotations

import click

#: Each option's group in --help, by its first long name; an option not listed goes under "Other".
OPTION_GROUPS: dict[str, tuple[str, ...]] = {
    "Sources": ("--base", "--offline", "--jobs", "--follow-symlinks"),
    "Comparison": ("--profile", "--rename", "--values", "--values-only", "--scheduler"),
    "Engines": ("--engine", "--vllm-runner"),
    "Policy": (
        "--ignore",
        "--allow-missing",
        "--allow-extra",
        "--allow-dtype-change",
        "--allow-event",
        "--fail-on",
        "--fail-on-conditional",
        "--allow-empty",
        "--config",
    ),
    "Output": (
        "--format",
        "--output",
        "--save",
        "--only-diffs",
        "--expand",
        "--color",
        "--quiet",
        "--verbose",
        "--no-step-summary",
    ),
}

EPILOG = """\b
Examples:
  ckptdiff ./published ./ours
      compare two local checkpoints (exit 0 compatible, 1 not, 2 trouble)
  ckptdiff org/drafter@v1 ./ours --base org/target -o report.md
      a Hub repo against a folder, injected weights checked; markdown report
  ckptdiff ./ours --engine sglang --base org/target
      does SGLang's loader use every weight of ./ours as trained?

\b
Manual: docs/index.md of the ckptdiff repository: the report and shell
completion (docs/usage.md), CI and policy (docs/ci-gate.md).
"""


class GroupedCommand(click.Command):
    """A command whose --help lists its options under headings, in the order of :data:`OPTION_GROUPS`."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        group_of = {name: group for group, names in OPTION_GROUPS.items() for name in names}
        sections: dict[str, list[tuple[str, str]]] = {group: [] for group in (*OPTION_GROUPS, "Other")}
        for param in self.get_params(ctx):
            if not isinstance(param, click.Option):
                continue
            record = param.get_help_record(ctx)
            if record is None:
                continue
            long_names = [opt for opt in param.opts if opt.startswith("--")]
            sections[group_of.get(long_names[0] if long_names else "", "Other")].append(record)
        for group, records in sections.items():
            if records:
                with formatter.section(group):
                    formatter.write_dl(records)
