"""The Protocols a plugin may ask for by annotation, which the components provide.

`readers`: what feeders and packers read of execution's rows (outputs, input overviews,
partners, consumers); `lifecycle`: what hooks and actions read and ask of execution and
accounting. They live apart from the built-in plugins so that a service implementing them does
not depend on dxts's own plugins.
"""
