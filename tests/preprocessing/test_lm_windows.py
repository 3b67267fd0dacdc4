import numpy as np

from preprocessing.lm_windows import bilm_stream, gpt_stream, windows


def test_windows_overlap_and_drop_the_tail():
    out = windows(np.arange(10), width=4, stride=3)
    assert out.tolist() == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    assert windows(np.arange(3), width=4, stride=3).shape == (0, 4)


def test_gpt_stream_marks_document_ends():
    assert gpt_stream([np.array([5, 6]), np.array([7])], end_of_document_id=102).tolist() == [5, 6, 102, 7, 102]


def test_bilm_stream_and_aligned_targets():
    words, ids = bilm_stream([([b"a", b"b"], np.array([10, 11])), ([b"c"], np.array([12]))], bos_id=1, eos_id=2)
    assert words.tolist() == [b"<S>", b"a", b"b", b"</S>", b"<S>", b"c", b"</S>"]
    assert ids.tolist() == [1, 10, 11, 2, 1, 12, 2]
    cut = windows(ids, width=2 + 2, stride=2)  # num_steps = 2
    inputs, forward, backward = cut[:, 1:-1], cut[:, 2:], cut[:, :-2]
    assert inputs.tolist() == [[10, 11], [2, 1], [12, 2]][:len(cut)]
    assert forward[0].tolist() == [11, 2] and backward[0].tolist() == [1, 10]
    covered = inputs.ravel().tolist()
    assert covered == ids[1:1 + len(covered)].tolist()  # every inner token is an input once
