"""The fusion's rules over candidate lists (``eventmem.core.query_rules``)."""

from __future__ import annotations

import numpy as np

from eventmem.core.query_rules import fuse


def test_the_linear_fusion_scales_each_list_to_the_query_and_weighs_them() -> None:
    scores, vector_part, keyword_part = fuse(
        [7, 8, 9],
        {7: 0.8, 8: 0.4},
        {8: 12.0, 9: 6.0},
        fusion="linear",
        weights=(0.5, 0.5),
        spread_cosines=True,
        searched=1000,
    )
    assert vector_part.tolist() == [0.8, 0.4, 0.0]
    assert keyword_part.tolist() == [0.0, 1.0, 0.5]
    np.testing.assert_allclose(scores, [0.5, 0.75, 0.25])
