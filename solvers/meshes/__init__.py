"""Meshes of the finite-volume engines: spherical Voronoi meshes (``voronoi``) and their limited
reconstruction (``reconstruction``), adaptive icosahedral meshes (``remesh``), dyadic meshes of the circle
(``dyadic``), and what adaptive runs keep across remeshes (``changing``, ``adaptive_state``)."""
