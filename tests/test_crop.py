"""benchmint crop: options checked before any work, clean errors (exit 2) for what cannot be rendered or written."""

import os
from importlib.resources import files

import pymupdf
import pytest

from benchmint.cli import main

SAMPLE = str(files("benchmint") / "samples" / "sample_paper.pdf")
BOX = ["100", "100", "600", "500"]


def crop(tmp_path, *extra, out="fig.png"):
    return main(["crop", SAMPLE, "--page", "1", "--box", *BOX, "--out", str(tmp_path / out), *extra])


@pytest.mark.parametrize("dpi", ["0", "-300", "2401", "20000"])
def test_a_dpi_out_of_range_is_refused(tmp_path, capsys, dpi):
    assert crop(tmp_path, "--dpi", dpi) == 2
    assert f"the DPI must be a whole number from 1 to 2400, got {dpi}" in capsys.readouterr().err
    assert not (tmp_path / "fig.png").exists()


def test_a_crop_too_large_for_memory_is_refused_before_rendering(tmp_path, capsys):
    # the whole page of the sample (612 x 792 pt) at 2400 DPI: 20400 x 26400 px
    assert main(["crop", SAMPLE, "--page", "1", "--box", "0", "0", "1000", "1000", "--dpi", "2400",
                 "--out", str(tmp_path / "big.png")]) == 2
    assert "the crop would be 20400 x 26400 px at 2400 DPI, more than 100,000,000 pixels" in capsys.readouterr().err


def test_the_output_is_png_and_named_so(tmp_path, capsys):
    assert crop(tmp_path, out="fig.jpg") == 2
    assert "the crop is written as PNG: name it .png, not fig.jpg" in capsys.readouterr().err
    assert not (tmp_path / "fig.jpg").exists()
    assert crop(tmp_path, "--dpi", "72", out="FIG.PNG") == 0
    with open(tmp_path / "FIG.PNG", "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    pix = pymupdf.Pixmap(str(tmp_path / "FIG.PNG"))
    # the box is 500 x 400 of 1000 on a 612 x 792 pt page: 306 x 316.8 pt, at 72 DPI one pixel a point
    assert (pix.width, pix.height) in {(306, 317), (307, 317), (306, 318), (307, 318)}


def test_an_unwritable_output_is_a_clean_error(tmp_path, capsys):
    (tmp_path / "file").write_text("a file, not a folder")
    assert crop(tmp_path, out="file/fig.png") == 2
    err = capsys.readouterr().err
    assert err.startswith("benchmint crop: error: cannot write ") and "Traceback" not in err


def test_messages_print_plain_numbers(tmp_path, capsys):
    assert main(["crop", SAMPLE, "--page", "1", "--box", "-10", "0", "100", "100", "--out",
                 str(tmp_path / "f.png")]) == 2
    err = capsys.readouterr().err
    assert "box 0 [-10.0, 0.0, 100.0, 100.0] lies outside" in err and "np.float64" not in err
    assert os.listdir(tmp_path) == []
