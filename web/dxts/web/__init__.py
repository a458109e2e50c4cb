"""dxts-web: the web view of workgraphs for shifters and production managers.

It owns no table and reads no SQL: every page is built from the services' gRPC contracts
(definition, execution, accounting), called with the signed-in user's own token, so what a
user sees and may steer is exactly what the services let that token see and steer.
"""
