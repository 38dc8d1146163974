"""Voice, photos and documents: download limits, transcription, images, text extraction."""
