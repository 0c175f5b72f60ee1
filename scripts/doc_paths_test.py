#!/usr/bin/env python3
"""Tests of scripts/doc_paths.py on small repositories written for each case."""
import contextlib
import io
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import doc_paths  # noqa: E402

PAGE = '# Title\n\n## The known-series fast path\n\n**Slow clients** (a bold lead-in).\n'


def repo(files):
    """A directory (not a git work tree) holding `files` (path -> text), and `docs/PAGE.md`."""
    root = pathlib.Path(tempfile.mkdtemp())
    for name, text in {'docs/PAGE.md': PAGE, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run(root):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = doc_paths.main(root)
    return status, out.getvalue()


class DocPathsTest(unittest.TestCase):
    def test_a_missing_path_is_reported_with_file_and_line(self):
        status, out = run(repo({
            'README.md': 'See `docs/PAGE.md`, docs/ and scripts/real.sh.\n\nAlso `docs/GONE.md`, then scripts/gone.sh.\n',
            'scripts/real.sh': '',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('README.md:3: no such path: docs/GONE.md', out)
        self.assertIn('README.md:3: no such path: scripts/gone.sh', out)
        self.assertNotIn('PAGE.md', out.split('citations read')[0])

    def test_rust_comments_are_read_and_string_literals_are_not(self):
        status, out = run(repo({
            'crates/x/src/lib.rs': '//! Cites `docs/PAGE.md` and, from the crate, `src/lib.rs`.\n'
                                   'const P: &str = "docs/ABSENT.md"; // but docs/MISSING.md here\n'
                                   '/// and `crates/x/src/gone.rs`\nfn f() {}\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('crates/x/src/lib.rs:2: no such path: docs/MISSING.md', out)
        self.assertIn('crates/x/src/lib.rs:3: no such path: crates/x/src/gone.rs', out)
        self.assertNotIn('ABSENT', out)

    def test_urls_other_projects_placeholders_and_globs_are_not_paths(self):
        status, out = run(repo({
            'docs/OTHER.md': 'https://github.com/o/r/blob/main/docs/absent.md, vllm/docs/absent.md,\n'
                             "Prometheus' storage/remote/write.go, `docs/<page>.md`, `crates/*/src/lib.rs`,\n"
                             '`docs/…`.\n',
        }))
        self.assertEqual(status, 0, out)

    def test_links_and_their_anchors_are_checked_from_the_linking_file(self):
        status, out = run(repo({
            'docs/OTHER.md': '[ok](PAGE.md#the-known-series-fast-path) [self](#other) [web](https://x.y/z)\n'
                             '[bad anchor](PAGE.md#slow-clients) [bad](../docs/GONE.md)\n\n## Other\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('docs/OTHER.md:2: no heading #slow-clients in PAGE.md', out)
        self.assertIn('docs/OTHER.md:2: link to no such path: ../docs/GONE.md', out)
        self.assertEqual(out.count('docs/OTHER.md:'), 2, out)

    def test_a_quoted_heading_may_wrap_and_may_be_a_bold_lead_in(self):
        status, out = run(repo({
            'src/main.rs': '// (docs/PAGE.md, "The known-series\n// fast path") and `docs/PAGE.md`,\n'
                           '// "Slow clients", but docs/PAGE.md, "No such part".\nfn main() {}\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('src/main.rs:3: no heading "no such part" in docs/PAGE.md', out)
        self.assertEqual(out.count('src/main.rs:'), 1, out)

    def test_in_a_code_fence_only_words_with_an_extension_or_a_slash_are_paths(self):
        status, out = run(repo({
            'deploy/x.yaml': '# measured: docs/PAGE.md\n# docs/GONE.md\nkey: docs/ALSO-GONE.md\n',
            'docs/OTHER.md': '```sh\nkubectl port-forward deploy/vllm-corrector 9490\nsh deploy/run.sh\n```\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('deploy/x.yaml:2: no such path: docs/GONE.md', out)
        self.assertIn('docs/OTHER.md:3: no such path: deploy/run.sh', out)
        self.assertNotIn('ALSO-GONE', out)
        self.assertNotIn('vllm-corrector', out)


if __name__ == '__main__':
    unittest.main()
