"""Book text: Gutenberg clean-up, RELiC's sentence boundaries, window counts."""

import pytest

from retrieval.segmentation import sentence_pipeline, split_sentences
from retrieval.text import paragraphs, strip_gutenberg, window_counts

GUTENBERG_BOOK = """\ufeffThe Project Gutenberg EBook of A Small Tale, by Nobody

This eBook is for the use of anyone anywhere at no cost.

*** START OF THIS PROJECT GUTENBERG EBOOK A SMALL TALE ***




Produced by Some Volunteers




Chapter 1

The cat sat on the mat.

End of the Project Gutenberg EBook of A Small Tale, by Nobody

*** END OF THIS PROJECT GUTENBERG EBOOK A SMALL TALE ***

Section 1. General Terms of Use and Redistributing Project Gutenberg-tm electronic works.
"""


class TestStripGutenberg:
    def test_removes_header_credit_footer_and_licence(self):
        assert strip_gutenberg(GUTENBERG_BOOK).strip() == "Chapter 1\n\nThe cat sat on the mat."

    def test_the_start_marker_may_say_the_instead_of_this(self):
        text = (
            "Header\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\nBody.\n"
            "*** END OF THE PROJECT GUTENBERG EBOOK X ***\nLicence"
        )
        assert strip_gutenberg(text).strip() == "Body."

    def test_the_old_end_line_alone_ends_the_work(self):
        text = (
            "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nBody.\n\n"
            "End of Project Gutenberg's X, by Y\nLicence text."
        )
        assert strip_gutenberg(text).strip() == "Body."

    def test_text_without_markers_is_unchanged_apart_from_the_bom(self):
        assert strip_gutenberg("\ufeffJust a story.\n\nThe end.\n") == "Just a story.\n\nThe end.\n"

    def test_windows_line_ends_become_unix_ones(self):
        assert strip_gutenberg("One.\r\n\r\nTwo.\r\n") == "One.\n\nTwo.\n"

    @pytest.mark.data
    def test_pride_and_prejudice_keeps_only_the_novel(self, shared_data):
        raw = (shared_data / "gutenberg" / "pride_and_prejudice.txt").read_text(encoding="utf-8")
        assert raw.startswith("\ufeff") and "*** START OF" in raw  # the fixture this test relies on

        novel = strip_gutenberg(raw)

        assert novel.lstrip().startswith("PRIDE AND PREJUDICE")
        assert novel.rstrip().endswith("had been the means of uniting them.")
        assert "Gutenberg" not in novel and "Produced by" not in novel and "\ufeff" not in novel

    @pytest.mark.data
    def test_persuasion_has_no_markers_and_is_kept_whole(self, shared_data):
        raw = (shared_data / "gutenberg" / "persuasion.txt").read_text(encoding="utf-8")
        assert strip_gutenberg(raw) == raw


class TestSplitSentences:
    @pytest.mark.parametrize(
        "text, sentences",
        [
            ("It rained. We stayed in.", ["It rained.", "We stayed in."]),
            ("Who came? Nobody did! Fine.", ["Who came?", "Nobody did!", "Fine."]),
            ("He waited... Then he left.", ["He waited...", "Then he left."]),
            ("He waited… then he left.", ["He waited…", "then he left."]),
            ("She had one wish: to go home.", ["She had one wish:", "to go home."]),
            ("He was poor; she was rich.", ["He was poor;", "she was rich."]),
            ('"Stop!" he cried.', ['"Stop!"', "he cried."]),
            ('Why not? "Because it is late."', ["Why not?", '"Because it is late."']),
            ("Why not? “Because.” Then silence.", ["Why not?", "“Because.”", "Then silence."]),
            ("Mr. Darcy bowed. Mrs. Bennet smiled.", ["Mr. Darcy bowed.", "Mrs. Bennet smiled."]),
        ],
        ids=[
            "period",
            "question-exclamation",
            "ellipsis-dots",
            "ellipsis-char",
            "colon",
            "semicolon",
            "closing-quote",
            "opening-quote",
            "curly-quotes",
            "titles",
        ],
    )
    def test_boundaries(self, text, sentences):
        assert split_sentences(text) == sentences

    def test_hard_wrapped_lines_join_and_whitespace_is_normalised(self):
        assert split_sentences("It was a\n   long   night\nindeed.") == ["It was a long night indeed."]

    def test_a_sentence_never_spans_a_paragraph_break(self):
        assert split_sentences("Chapter 1\n\nIt began\n \nhere.") == ["Chapter 1", "It began", "here."]

    def test_blank_text_has_no_sentences(self):
        assert split_sentences(" \n\n \t\n") == []

    def test_paragraphs_are_blank_line_separated(self):
        assert paragraphs("a\nb\n\n\n c \n") == ["a b", "c"]

    def test_the_pipeline_is_built_once(self):
        assert sentence_pipeline() is sentence_pipeline()


class TestWindowCounts:
    def test_a_long_text_has_s_minus_n_plus_one_windows_of_each_length(self):
        assert window_counts(7) == {1: 7, 2: 6, 3: 5, 4: 4, 5: 3}

    def test_a_short_text_has_no_windows_longer_than_itself(self):
        assert window_counts(2) == {1: 2, 2: 1, 3: 0, 4: 0, 5: 0}

    def test_the_longest_window_is_a_parameter(self):
        assert window_counts(4, max_length=2) == {1: 4, 2: 3}
