from demo.shakespeare import to_bert_format

PLAY = """HAMLET

by William Shakespeare


ACT I.

Scene I. Elsinore.

Ber.
Who's there?

Fran.
Nay, answer me: stand, and unfold yourself. Long live the king!
Is it you?

Scene II. A room of state.

King.
Though yet of Hamlet our dear brother's death
The memory be green.
"""


def test_scenes_become_documents_and_speeches_sentences():
    docs = to_bert_format(PLAY)
    assert docs == [
        ["HAMLET", "by William Shakespeare", "ACT I."],
        ["Scene I.", "Elsinore.", "Ber.", "Who's there?", "Fran.",
         "Nay, answer me: stand, and unfold yourself.", "Long live the king!", "Is it you?"],
        ["Scene II.", "A room of state.", "King.",
         "Though yet of Hamlet our dear brother's death The memory be green."],
    ]
