"""Discussion paragraphs: body text citing exactly one figure, merged, 100-300 tokens."""

import pytest

from benchmint.pdf.context import count_tokens, discussion, figure_refs, holds_table_data


@pytest.mark.parametrize("text, refs", [
    ("As shown in Fig. 2, the gap closes.", {"2"}),
    ("Figure 2(b) and Figure 2(c) show maps.", {"2"}),
    ("Figs. 2 and 3 compare the spectra.", {"2", "3"}),
    ("Figures 2-4 summarise the data.", {"2", "3", "4"}),
    ("See Figs. 2b, 3c for details.", {"2", "3"}),
    ("Supplementary Fig. S1 shows the setup.", {"S1"}),
    ("FIG. 5 shows a phase diagram.", {"5"}),
    ("No figure here; see Table 2.", set()),
    ("The configuration 3 is stable.", set()),
    ("Figure 2.3 shows the transplant curves.", {"2.3"}),  # a chapter's figure
    ("Figures 2.1-2.3 and Fig. 4 compare them.", {"2.1", "2.2", "2.3", "4"}),
    ("The curves are in Figure 2. 1,000 runs were made.", {"2"}),  # the sentence's period ends the number
    ("Figures 2.1-3.2 span two chapters.", {"2.1", "3.2"}),  # no range across chapters
])
def test_figure_refs(text, refs):
    assert figure_refs(text) == refs


def test_table_data():
    assert holds_table_data("The values in Table 1 agree with DFT.")
    assert holds_table_data("a 1.2 3.4 5.6 7.8 9.0 1.1 2.2 b c d 3.3 4.4")
    assert not holds_table_data("The lattice constant of 2.46 Å agrees with graphene, as seen in Fig. 2.")


SENTENCE = "The dI/dV map in Fig. 2(b) reveals a modulation of the local density of states with the moiré period. "


def test_discussion_merges_fragments_and_filters():
    paragraphs = [
        "Figure 2. (a) Topography. (b) dI/dV map.",          # the caption itself: not discussion
        SENTENCE * 4,                                          # cites Fig. 2 only
        "Figs. 2 and 3 together show the trend.",              # cites several figures: dropped
        "Table 1 lists the fit values of Fig. 2.",             # table data: dropped
        "Unrelated paragraph about sample growth.",
        SENTENCE * 3,                                          # another fragment for Fig. 2: merged
    ]
    text = discussion(paragraphs, "2")
    assert text == " ".join([" ".join((SENTENCE * 4).split()), " ".join((SENTENCE * 3).split())])
    assert 100 <= count_tokens(text) <= 300
    assert discussion(paragraphs, "2b") == text  # a panel label cites its figure
    assert discussion(paragraphs, "3") is None
    assert discussion(paragraphs, "2.1") is None  # a chapter's figure 2.1 is another figure
    assert discussion([SENTENCE], "2") is None  # too short
    assert discussion([SENTENCE * 30], "2") is None  # too long
    assert discussion([SENTENCE], "2", min_tokens=5) is not None


def test_a_chapters_figures_have_their_own_discussions():
    first = "The survival curves of Figure 2.1 separate after the first year of follow-up. " * 8
    second = "Figure 2.2 shows the transplant states of the same subjects over time. " * 8
    assert discussion([first, second], "2.1") == " ".join(first.split())
    assert discussion([first, second], "2.2") == " ".join(second.split())
    assert discussion([first, second], "2") is None
