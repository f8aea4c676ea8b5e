"""Operations: each builds the requests, guards and kept-row rules of one kind of
erasure and hands them to the eraser (:mod:`erasure_receipts._engine.eraser`)."""
