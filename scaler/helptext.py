"""How `scaler <command> --help` lays out text: descriptions wrapped, examples kept as written."""

from __future__ import annotations

import argparse
import textwrap


class Paragraphs(argparse.RawDescriptionHelpFormatter):
    """Wraps the description's paragraphs to the terminal, keeps the epilog's lines as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "examples:" in text:
            return super()._fill_text(text, width, indent)
        return "\n\n".join(
            textwrap.fill(part, width, initial_indent=indent, subsequent_indent=indent)
            for part in text.split("\n\n")
        )
