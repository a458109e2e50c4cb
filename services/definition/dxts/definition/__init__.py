"""dxts."""
