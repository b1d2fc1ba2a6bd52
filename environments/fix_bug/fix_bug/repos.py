"""The rows: small Python repositories with one bug each, the fix (the reference answer, as shell
commands), and hidden checks (an expression and the repr it must print) that never enter the sandbox."""

from __future__ import annotations

REPOS = [
    {
        "name": "stats",
        "task": "`mean([1, 2, 3])` should be 2.0 but is not.",
        "files": {
            "stats.py": (
                '"""Small statistics helpers."""\n\n\n'
                "def mean(xs):\n"
                '    """The arithmetic mean of a non-empty list of numbers."""\n'
                "    return sum(xs) / (len(xs) - 1)\n\n\n"
                "def spread(xs):\n"
                '    """Largest minus smallest."""\n'
                "    return max(xs) - min(xs)\n"
            ),
            "test_stats.py": "from stats import mean, spread\n\nassert mean([2, 4]) == 3.0\nassert spread([3, 1, 2]) == 2\nprint('ok')\n",
        },
        "fix": "sed -i 's/len(xs) - 1/len(xs)/' stats.py",
        "checks": [("mean([1, 2, 3])", "2.0"), ("mean([4])", "4.0"), ("mean([1.5, 2.5])", "2.0"), ("spread([5, -1])", "6")],
        "module": "stats",
    },
    {
        "name": "palindrome",
        "task": "`is_palindrome('Never odd or even')` should be True but is False.",
        "files": {
            "text.py": (
                '"""Text helpers."""\n\n\n'
                "def is_palindrome(s):\n"
                '    """True when s reads the same backwards, ignoring case, spaces and punctuation."""\n'
                "    cleaned = [c.lower() for c in s if c.isalnum()]\n"
                "    return cleaned == cleaned[::-2]\n"
            ),
            "test_text.py": "from text import is_palindrome\n\nassert is_palindrome('abba')\nassert not is_palindrome('abc')\nprint('ok')\n",
        },
        "fix": "sed -i 's/\\[::-2\\]/[::-1]/' text.py",
        "checks": [("is_palindrome('Never odd or even')", "True"), ("is_palindrome('abcba')", "True"),
                   ("is_palindrome('ab')", "False"), ("is_palindrome('A man, a plan, a canal: Panama')", "True")],
        "module": "text",
    },
    {
        "name": "fibonacci",
        "task": "`fib(10)` should be 55 (fib(0) = 0, fib(1) = 1) but is not.",
        "files": {
            "fib.py": (
                '"""Fibonacci numbers."""\n\n\n'
                "def fib(n):\n"
                '    """The n-th Fibonacci number: fib(0) = 0, fib(1) = 1."""\n'
                "    a, b = 0, 1\n"
                "    for _ in range(n - 1):\n"
                "        a, b = b, a + b\n"
                "    return a\n"
            ),
            "test_fib.py": "from fib import fib\n\nassert fib(0) == 0\nprint('ok')\n",
        },
        "fix": "sed -i 's/range(n - 1)/range(n)/' fib.py",
        "checks": [("fib(10)", "55"), ("fib(1)", "1"), ("fib(2)", "1"), ("fib(20)", "6765")],
        "module": "fib",
    },
    {
        "name": "inventory",
        "task": "Removing items from an `Inventory` makes its count go up instead of down.",
        "files": {
            "inventory/__init__.py": "from .core import Inventory\n\n__all__ = ['Inventory']\n",
            "inventory/core.py": (
                '"""A tiny inventory of item counts."""\n\n\n'
                "class Inventory:\n"
                "    def __init__(self):\n"
                "        self.items = {}\n\n"
                "    def add(self, item, qty=1):\n"
                "        self.items[item] = self.items.get(item, 0) + qty\n\n"
                "    def remove(self, item, qty=1):\n"
                "        left = self.items.get(item, 0) + qty\n"
                "        if left < 0:\n"
                "            raise ValueError(f'only {self.items.get(item, 0)} {item} left')\n"
                "        self.items[item] = left\n\n"
                "    def count(self, item):\n"
                "        return self.items.get(item, 0)\n"
            ),
            "test_inventory.py": "from inventory import Inventory\n\ninv = Inventory()\ninv.add('apple', 2)\nassert inv.count('apple') == 2\nprint('ok')\n",
        },
        "fix": "sed -i 's/left = self.items.get(item, 0) + qty/left = self.items.get(item, 0) - qty/' inventory/core.py",
        "checks": [("(lambda i: (i.add('a', 5), i.remove('a', 2), i.count('a'))[-1])(Inventory())", "3"),
                   ("(lambda i: (i.add('b', 1), i.remove('b'), i.count('b'))[-1])(Inventory())", "0"),
                   ("(lambda i: (i.add('c', 7), i.count('c'))[-1])(Inventory())", "7")],
        "module": "inventory",
    },
]
