"""`image_data_url` of verifiers' v1 API: a PIL image as a `data:` URL a chat message can carry."""

from __future__ import annotations

import base64
import io
from typing import Any


def image_data_url(image: Any, format: str = "PNG") -> str:
    buffer = io.BytesIO()
    image.save(buffer, format=format)
    return f"data:image/{format.lower()};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"
