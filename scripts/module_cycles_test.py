#!/usr/bin/env python3
"""Tests of scripts/module_cycles.py on small crates written for each case."""
import contextlib
import io
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import module_cycles  # noqa: E402


def crate(files):
    """A workspace with one member `crates/x` holding `files` (path under src/ -> text)."""
    root = pathlib.Path(tempfile.mkdtemp())
    (root / 'src').mkdir()
    (root / 'src/main.rs').write_text('fn main() {}\n')
    for name, text in files.items():
        path = root / 'crates/x/src' / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run(root):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = module_cycles.main(root)
    return status, out.getvalue()


class ModuleCyclesTest(unittest.TestCase):
    def test_two_siblings_using_each_other_are_a_cycle(self):
        status, out = run(crate({
            'lib.rs': 'mod a;\nmod b;\n',
            'a.rs': 'use crate::b::B;\npub struct A;\n',
            'b.rs': 'pub struct B;\nfn f() { let _ = super::a::A; }\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('crate::a -> crate::b: crate::b::B', out)
        self.assertIn('crate::b -> crate::a: super::a::A', out)

    def test_three_siblings_around_a_circle_are_a_cycle(self):
        status, out = run(crate({
            'lib.rs': 'mod a;\nmod b;\nmod c;\n',
            'a.rs': 'use crate::b::B;\npub struct A;\n',
            'b.rs': 'use crate::c::C;\npub struct B;\n',
            'c.rs': 'use crate::a::A;\npub struct C;\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('cycle: crate::a, crate::b, crate::c', out)

    def test_a_parent_and_its_child_may_use_each_other(self):
        status, out = run(crate({
            'lib.rs': 'mod a;\npub use a::A;\npub struct Shared;\n',
            'a.rs': 'mod inner;\nuse super::Shared;\nuse inner::Inner;\npub struct A;\n',
            'a/inner.rs': 'use super::A;\nuse crate::Shared;\npub struct Inner;\n',
        }))
        self.assertEqual(status, 0, out)
        self.assertIn('x: 3 modules, 0 sibling uses, 0 cycles', out)

    def test_a_use_of_a_siblings_descendant_is_a_use_of_that_sibling(self):
        status, out = run(crate({
            'lib.rs': 'mod a;\nmod b;\n',
            'a.rs': 'use crate::b::c::C;\npub struct A;\n',
            'b/mod.rs': 'pub(crate) mod c;\n',
            'b/c.rs': 'pub struct C(crate::a::A);\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('crate::a -> crate::b: crate::b::c::C', out)
        self.assertIn('crate::b -> crate::a: crate::a::A', out)

    def test_a_use_through_a_re_export_is_a_use_of_the_defining_module(self):
        status, out = run(crate({
            'lib.rs': 'mod a;\nmod b;\npub use b::*;\n',
            'a.rs': 'use super::B;\npub struct A;\n',
            'b.rs': 'pub struct B;\npub fn f() -> crate::a::A { crate::a::A }\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('crate::a -> crate::b: super::B', out)

    def test_a_glob_use_of_the_parent_uses_what_it_re_exports_from_a_sibling(self):
        status, out = run(crate({
            'lib.rs': 'mod a;\nmod b;\npub use b::B;\n',
            'a.rs': 'use super::*;\npub struct A(B);\n',
            'b.rs': 'use crate::a::A;\npub struct B;\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('crate::a -> crate::b: super::*', out)

    def test_test_modules_comments_and_strings_are_not_uses(self):
        status, out = run(crate({
            'lib.rs': 'mod a;\nmod b;\n#[cfg(test)]\nmod a_tests;\n',
            'a.rs': 'pub struct A;\n// crate::b::B in a comment\nconst S: &str = "crate::b::B";\n'
                    '#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n',
            'a_tests.rs': 'use crate::a::A;\nuse crate::b::B;\n',
            'b.rs': 'use crate::a::A;\npub struct B;\n',
        }))
        self.assertEqual(status, 0, out)
        self.assertIn('x: 3 modules, 1 sibling uses, 0 cycles', out)

    def test_a_module_at_a_path_attribute_is_read_from_that_file(self):
        status, out = run(crate({
            'lib.rs': 'mod a;\nmod c;\n',
            'a.rs': '#[path = "b_impl.rs"]\nmod b;\npub struct A;\n',
            'b_impl.rs': 'use crate::c::C;\npub struct B;\n',
            'c.rs': 'pub struct C(crate::a::A);\n',
        }))
        self.assertEqual(status, 1, out)
        self.assertIn('crate::a -> crate::c: crate::c::C', out)


if __name__ == '__main__':
    unittest.main()
