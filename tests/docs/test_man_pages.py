#!/usr/bin/python3
"""The man pages are the one reference for tfpin's flags, job options and site keys.

- tfpin(1): every option that `tfpin SUB --help` lists (the code's own CLI11 definitions) is an
  item (.TP tag) of that subcommand's OPTIONS section of cli/tfpin.1.
- tfpin-plugin(8): every site key of the configured snippet (which plugin-unit holds to the
  plugin's key table; plugin-unit also holds the page to the registered job options and the
  table) is an item of SITE CONFIGURATION.
- Nowhere else as a second table: no Markdown table in README.md, docs/ or the component READMEs
  has a row whose first cell is a flag, a job option or a site key.

  test_man_pages.py TFPIN SOURCE_ROOT SNIPPET
"""
import re
import subprocess
import sys
import unittest
from pathlib import Path

TFPIN, SOURCE_ROOT, SNIPPET = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
del sys.argv[1:4]


def man_sections(path):
    """{section title: [tag line of each .TP item, with groff's \\- as -]}."""
    sections, title, previous = {}, None, ""
    for line in path.read_text().splitlines():
        if line.startswith(".SH "):
            title = line[4:].strip().strip('"')
            sections[title] = []
        elif previous == ".TP" and title is not None:
            sections[title].append(line.replace("\\-", "-"))
        previous = line
    return sections


def options_in(tags):
    return {o for tag in tags for o in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", tag)}


def help_options(*argv):
    r = subprocess.run([TFPIN, *argv, "--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"tfpin {' '.join(argv)} --help: {r.returncode} {r.stderr}")
    return r.stdout


def site_keys():
    return re.findall(r"^#\s{3}(\w+)=", SNIPPET.read_text(), re.M)


class CommandPage(unittest.TestCase):
    def test_every_flag_of_every_subcommand_is_an_item_of_its_section(self):
        sections = man_sections(SOURCE_ROOT / "cli" / "tfpin.1")
        # (CLI11 before 2.4 heads the list "Subcommands:", later releases "SUBCOMMANDS:")
        parts = re.split(r"^subcommands:\s*$", help_options(), flags=re.M | re.I)
        self.assertEqual(len(parts), 2, parts)
        subcommands = re.findall(r"^  (\w+) ", parts[1], re.M)
        self.assertTrue({"show", "run"} <= set(subcommands), subcommands)
        checked = 0
        for sub in subcommands:
            titles = [t for t in sections
                      if t.startswith("OPTIONS") and re.search(rf"\b{sub}\b", t)]
            self.assertEqual(len(titles), 1, f"tfpin(1) has no OPTIONS section for {sub}: "
                             f"{list(sections)}")
            documented = options_in(sections[titles[0]])
            # ("-v, --verbose" in CLI11 2.1, "-v,     --verbose" in 2.6)
            flags = set(re.findall(r"^\s+(?:-\w,\s*)?(--[\w-]+)", help_options(sub), re.M))
            flags.discard("--help")
            self.assertTrue(flags, sub)
            missing = sorted(flags - documented)
            self.assertEqual(missing, [], f"tfpin {sub}: flags missing from tfpin(1) "
                             f"\"{titles[0]}\"")
            checked += len(flags)
        self.assertGreater(checked, 20)

    def test_the_check_sees_a_missing_flag(self):
        # The parser of the page must not find flags that are not items.
        tags = [".BI --threads \" N\"", ".BR -v \", \" --verbose", ".B show"]
        self.assertEqual(options_in(tags), {"--threads", "--verbose"})


class PluginPage(unittest.TestCase):
    def test_every_site_key_is_an_item_of_site_configuration(self):
        keys = site_keys()
        self.assertGreaterEqual(len(keys), 10)
        tags = man_sections(SOURCE_ROOT / "plugin" / "tfpin-plugin.8")["SITE CONFIGURATION"]
        documented = {m.group(1) for tag in tags for m in [re.match(r"\.B\w*\s+(\w+)=", tag)] if m}
        self.assertEqual(sorted(set(keys) - documented), [])


class NoSecondTable(unittest.TestCase):
    def test_no_markdown_table_lists_flags_or_keys(self):
        keys = site_keys()
        first_cell = re.compile(r"^\|\s*`(--[\w-]+|-\w, --[\w-]+|(?:%s)=)" % "|".join(keys))
        documents = [SOURCE_ROOT / "README.md", *sorted((SOURCE_ROOT / "docs").rglob("*.md")),
                     SOURCE_ROOT / "engine" / "README.md", SOURCE_ROOT / "shim" / "README.md",
                     SOURCE_ROOT / "etc" / "containers" / "README.md"]
        self.assertGreater(len(documents), 6)
        rows = [f"{doc.relative_to(SOURCE_ROOT)}:{n}: {line}"
                for doc in documents
                for n, line in enumerate(doc.read_text().splitlines(), 1)
                if first_cell.match(line)]
        self.assertEqual(rows, [], "flags and site keys are documented in the man pages only")


if __name__ == "__main__":
    unittest.main(verbosity=2)
