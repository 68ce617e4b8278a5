"""Figure records against hand labels: IoU and the counts, worked out by hand."""

import pytest

from benchmint.pdf.evaluate import compare, iou


def test_iou_by_hand():
    assert iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert iou((0, 0, 10, 10), (5, 0, 15, 10)) == pytest.approx(50 / 150)
    assert iou((0, 0, 10, 10), (2, 2, 4, 4)) == pytest.approx(4 / 100)
    assert iou((0, 0, 10, 10), (10, 0, 20, 10)) == 0.0  # touching edges share no area
    assert iou(None, (0, 0, 1, 1)) == 0.0 and iou((0, 0, 0, 0), (0, 0, 0, 0)) == 0.0


def test_compare_meets_labels_on_file_name_page_and_label():
    labels = [
        {"pdf": "src/a.pdf", "page": 0, "label": "1", "body": [0, 0, 10, 10], "panels": 1},
        {"pdf": "src/a.pdf", "page": 1, "label": "2", "body": [0, 0, 10, 10], "panels": 4},
        {"pdf": "src/a.pdf", "page": 2, "label": "3", "body": [0, 0, 10, 10], "panels": 2},
        {"pdf": "src/a.pdf", "page": 3, "label": "4", "body": [0, 0, 10, 10], "panels": 1},
    ]
    records = [  # pages counted from 1, as harvest counts them
        {"pdf": "a.pdf", "page": 1, "label": "1", "body_box": [0, 0, 10, 5], "panels": 1},
        {"pdf": "a.pdf", "page": 2, "label": "2", "body_box": [0, 0, 10, 10], "panels": 4},
        {"pdf": "a.pdf", "page": 2, "label": "3", "body_box": [0, 0, 10, 10], "panels": 2},  # wrong page
        {"pdf": "a.pdf", "page": 4, "label": "4", "body_box": None, "panels": 1},  # a record without a body
    ]
    report = compare(records, labels)
    assert [r.iou for r in report.results] == [0.5, 1.0, 0.0, 0.0]
    s = report.summary()
    assert (s["labelled"], s["found"], s["with_body"], s["placed"], s["multi_panel"], s["panels_exact"]) == \
        (4, 3, 2, 2, 2, 1)
    assert s["mean_iou"] == pytest.approx(1.5 / 4)
    assert (s["single_panel"], s["single_overcounted"]) == (2, 0)
    records[0]["panels"] = 3  # figure 1, one panel, over-counted; figure 4's record has no body but counts
    s = compare(records, labels).summary()
    assert (s["single_panel"], s["single_overcounted"], s["panels_exact"]) == (2, 1, 1)
