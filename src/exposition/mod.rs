//! exposition layer (being implemented).
