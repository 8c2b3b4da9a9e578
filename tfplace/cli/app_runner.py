"""How every tfplace program runs: the `tfplace` verbs and `scripts/`.

`run_app` wraps `absl.app.run` with what a person at a terminal expects:

  * bad input (`TfplaceError`) prints one line, `<program>: error: ...`, and
    exits with status 2; so do arguments a program without positional ones
    was given (`scripts/fidelity.py --replay a.gz b.gz` judged a.gz alone
    and said nothing of b.gz);
  * output piped into a program that stops reading (`tfplace info g | head`)
    ends quietly, without a BrokenPipeError traceback;
  * Ctrl-C prints `<program>: interrupted` and exits with status 130, having
    written nothing after the interrupt (`tfplace.interrupts`), even when
    TensorFlow swallowed the KeyboardInterrupt;
  * a plain run logs warnings and errors only and hides TensorFlow's C++
    start-up lines (`tfplace.cli.quiet`); `-v 0` (INFO) or more shows all;
  * `--help` (or `-?`, `--helpshort`, `--helpfull`) prints the flags and exits
    with status 0 (absl's own exits with 1).

A script calls `start_script` first, before its imports: from there on a
Ctrl-C ends it cleanly and TensorFlow's start-up lines are hidden, even
where a module it imports loads TensorFlow.
"""

import atexit
import contextlib
import os
import sys
from typing import Callable, List, Optional

from tfplace import interrupts
from tfplace.cli.quiet import filtered_stderr


def fail(program: str, message: str) -> None:
  """Prints `program: error: message` and exits with status 2."""
  sys.stderr.write(f"{program}: error: {message}\n")
  sys.exit(2)


HELP_ARGS = ("-?", "--help", "--helpshort", "--helpfull")  # absl's help flags.
_early_filter: List[contextlib.ExitStack] = []


def start_script(program: str) -> None:
  """A script's first call, before its imports: Ctrl-C ends it cleanly
  (`interrupts.install`), and unless `-v` asks for INFO logs, TensorFlow's
  start-up lines are filtered from stderr from now on (`run_app` keeps
  the filter and closes it; so does the exit of a script that fails before
  it gets there)."""
  interrupts.install(program)
  if _early_filter or is_verbose(sys.argv[1:]):
    return
  stack = contextlib.ExitStack()
  stack.enter_context(filtered_stderr())
  _early_filter.append(stack)
  atexit.register(stack.close)  # Drains what is left before the exit.


def run_app(main: Callable[[List[str]], None], argv: List[str], program: str,
            flags_parser: Optional[Callable] = None,
            positional: bool = False) -> None:
  """Runs `main(argv)` under absl with the behaviour in the module doc.

  Args:
    main: the program's main function (gets the remaining argv).
    argv: the full argv; argv[0] names the program to absl.
    program: the name in messages (e.g. "tfplace place").
    flags_parser: absl flags parser; default one that turns flag errors into
      exit status 2 with the program's name.
    positional: whether the program takes positional arguments (the
      `tfplace` verbs' GRAPH...); without, any is refused.
  """
  interrupts.install(program)
  interrupts.started()
  try:
    quiet = (_early_filter.pop() if _early_filter
             else filtered_stderr(enabled=not is_verbose(argv[1:])))
    with quiet:
      _run(main, argv, program, flags_parser, positional)
  except BrokenPipeError:
    # The reader went away: the rest of the output has nowhere to go, and
    # the interpreter's own flush at exit must not fail again.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(141)  # As a shell reports a program killed by SIGPIPE.
  except KeyboardInterrupt:
    interrupts.note_interrupt()
  except SystemExit:
    if not interrupts.interrupted():  # Else TF swallowed a Ctrl-C.
      raise
  if interrupts.interrupted():
    sys.stderr.write(f"{program}: interrupted\n")
    sys.exit(130)


def _run(main, argv, program, flags_parser, positional) -> None:
  import tfplace  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF loads)
  from absl import app, flags, logging
  from tfplace.errors import Interrupted, TfplaceError
  verbose = is_verbose(argv[1:])

  def parse(args):
    try:
      return flags.FLAGS(args)
    except flags.Error as e:
      fail(program, f"{e} (see {program} --help)")

  def run_main(args):
    if not verbose:
      logging.set_verbosity(logging.WARNING)  # -v 0 (INFO) or more for all.
    if not positional and len(args) > 1:
      fail(program, f"takes no positional arguments, got "
                    f"{' '.join(args[1:])!r} (flags start with --; a list "
                    f"flag takes one comma-separated value; see {program} "
                    f"--help)")
    try:
      return main(args)
    except Interrupted:
      raise KeyboardInterrupt from None
    except TfplaceError as e:
      fail(program, str(e))

  try:
    app.run(run_main, argv=argv, flags_parser=flags_parser or parse)
  except SystemExit as e:
    if e.code == 1 and any(a in HELP_ARGS for a in argv[1:]):
      sys.exit(0)  # absl printed the help, then exited with 1.
    raise


def is_verbose(args: List[str]) -> bool:
  """True if -v/--verbosity asks for INFO logs or more."""
  for i, arg in enumerate(args):
    if arg in ("-v", "--verbosity") and i + 1 < len(args):
      return args[i + 1].isdigit()
    if arg.startswith(("--verbosity=", "-v=")):
      return arg.split("=", 1)[1].isdigit()
  return False
