"""`prime train`'s one error line quotes an environment's own error with control characters escaped."""

from tests.support.untrusted import SHOWN, raw_controls, write_env
from tests.train.support import assert_one_error_line, run_train, write


def test_an_environments_error_is_quoted_escaped(tmp_path):
    write_env(tmp_path)
    path = write(tmp_path, 'model = "local"\nbatch_size = 8\nrollouts_per_example = 4\n'
                           '[[env]]\nid = "evil-env"\nargs = { fail = true }\n')
    result = run_train([str(path), "--dry-run"], cwd=tmp_path)
    line = assert_one_error_line(result, "cannot load environment 'evil-env' (RuntimeError: no data here")
    assert raw_controls(result.stdout + result.stderr) == [] and SHOWN.split("\\r")[0] in line
