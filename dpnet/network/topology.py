"""Communication graphs of the J machines: named builders, graph files, validation, summaries.

A topology is an undirected, connected :class:`networkx.Graph` on the nodes ``0..J-1``; node
``j`` is MPI rank ``j`` and an edge ``{i, j}`` means the two machines exchange iterates. The
self-loops ``E_jj = 1`` of the ADMM adjacency matrix are implicit (the solver adds them), so a
graph itself must not carry self-loops.

``paper5``: the J = 5 adjacency matrix of paper 3 (Li & Zhang 2024, Table 1 "E as in section 3")
was lost in the text extraction. We use the 5-cycle 0-1-2-3-4-0 plus the chord {0, 2}: connected,
not complete (so that, unlike the paper's J = 10, 20 runs with E = all-ones, the J = 5 run is a
genuinely decentralized one), with unequal degrees (3, 2, 3, 2, 2) so that per-node degree
handling is exercised.
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import networkx as nx
import numpy as np

from dpnet.errors import TopologyError

# the default of the CLI and the estimator: paper 3's 5-machine graph for J = 5, a ring else
DEFAULT_TOPOLOGY = "auto"
DEFAULT_MACHINES = 5
TOPOLOGY_NAMES = (
    "auto",
    "paper5",
    "ring",
    "path",
    "star",
    "complete",
    "grid",
    "random-regular",
    "erdos-renyi",
    "small-world",
)

_MAX_TRIES = 100
_FILE_SUFFIXES = (".edgelist", ".txt", ".adjlist", ".graphml", ".gml", ".json")


def _grid_rows(n_nodes: int) -> int:
    return max(d for d in range(1, math.isqrt(n_nodes) + 1) if n_nodes % d == 0)


def _grid_shape(n_nodes: int) -> tuple[int, int]:
    """Rows = largest divisor of n_nodes that is <= sqrt(n_nodes), cols = n_nodes / rows.
    TopologyError when that is a single row of more than one node (J prime, or 2 or 3): not a
    grid but a path, named as the sizes nearest to J that are grids."""
    rows = _grid_rows(n_nodes)
    if rows == 1 and n_nodes > 1:
        below = next((j for j in range(n_nodes - 1, 3, -1) if _grid_rows(j) > 1), None)
        above = next(j for j in range(max(n_nodes + 1, 4), 2 * n_nodes + 5) if _grid_rows(j) > 1)
        nearest = f"{below} or {above}" if below else str(above)
        raise TopologyError(
            f"a grid of {n_nodes} machines would be a 1 x {n_nodes} path: a grid needs J = rows "
            f"x cols with 2 <= rows <= cols (nearest: {nearest}); or use --topology path"
        )
    return rows, n_nodes // rows


def _connected_draw(draw: Any, seed: int | None, what: str) -> nx.Graph:
    """Call ``draw(seed_k)`` with seeds derived from ``seed`` until the graph is connected."""
    rng = np.random.default_rng(seed)
    for _ in range(_MAX_TRIES):
        G = draw(int(rng.integers(2**31 - 1)))
        if nx.is_connected(G):
            return G
    raise TopologyError(f"{what}: no connected graph in {_MAX_TRIES} seeded draws")


def _named(spec: str, n: int, seed: int | None, degree: int, edge_prob: float | None) -> nx.Graph:
    if spec == "paper5":
        if n != 5:
            raise TopologyError(f"topology 'paper5' has 5 nodes, but {n} were requested")
        G = nx.cycle_graph(5)
        G.add_edge(0, 2)
        return G
    if spec == "ring":
        return nx.cycle_graph(n) if n >= 3 else nx.path_graph(n)
    if spec == "path":
        return nx.path_graph(n)
    if spec == "star":
        return nx.star_graph(n - 1)
    if spec == "complete":
        return nx.complete_graph(n)
    if spec == "grid":
        rows, cols = _grid_shape(n)
        return nx.convert_node_labels_to_integers(nx.grid_2d_graph(rows, cols), ordering="sorted")
    if spec == "random-regular":
        if not 1 <= degree < n or (degree * n) % 2:
            raise TopologyError(
                f"random-regular: degree {degree} is impossible on {n} nodes "
                "(need 1 <= degree < J and degree * J even)"
            )
        if degree == 1 and n > 2:
            raise TopologyError("random-regular: degree 1 on more than 2 nodes is disconnected")
        return _connected_draw(
            lambda s: nx.random_regular_graph(degree, n, seed=s), seed, "random-regular"
        )
    if spec == "erdos-renyi":
        p = (min(1.0, 2.0 * math.log(n) / n) if n > 1 else 1.0) if edge_prob is None else edge_prob
        if not 0.0 < p <= 1.0:
            raise TopologyError(f"erdos-renyi: edge probability {p} is not in (0, 1]")
        return _connected_draw(lambda s: nx.gnp_random_graph(n, p, seed=s), seed, "erdos-renyi")
    # small-world
    if n < 3:
        return nx.path_graph(n)
    k = 4 if n >= 6 else 2
    rng = np.random.default_rng(seed)
    try:
        return nx.connected_watts_strogatz_graph(
            n, k, 0.3, tries=_MAX_TRIES, seed=int(rng.integers(2**31 - 1))
        )
    except nx.NetworkXError:
        raise TopologyError(
            f"small-world: no connected graph in {_MAX_TRIES} seeded draws"
        ) from None


def _read_edge_list(path: Path) -> nx.Graph:
    """Strict edge list: each line (after removing '#' comments) is blank or exactly "u v"."""
    G = nx.Graph()
    for k, line in enumerate(path.read_text().splitlines(), start=1):
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        if len(tokens) != 2:
            raise ValueError(f"line {k}: expected 'u v', got {line.strip()!r}")
        G.add_edge(*tokens)
    return G


def _read_graph_file(path: Path) -> nx.Graph:
    suffix = path.suffix.lower()
    try:
        if suffix in (".edgelist", ".txt"):
            return _read_edge_list(path)
        if suffix == ".adjlist":
            return nx.read_adjlist(path, nodetype=str)
        if suffix == ".graphml":
            return nx.read_graphml(path)
        if suffix == ".gml":
            return nx.read_gml(path, label="id")
        with path.open() as fh:
            data = json.load(fh)
        # networkx < 3.6 writes the edges under "links", later versions under "edges"
        return nx.node_link_graph(data, edges="links" if "links" in data else "edges")
    except (
        OSError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        ElementTree.ParseError,
        nx.NetworkXError,
    ) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TopologyError(f"cannot read graph file {path}: {msg}") from None


def build_topology(
    spec: str,
    n_nodes: int,
    *,
    seed: int | None = 0,
    degree: int = 3,
    edge_prob: float | None = None,
) -> nx.Graph:
    """Build the graph named ``spec`` on ``n_nodes`` nodes, or read it from a graph file.

    Names are :data:`TOPOLOGY_NAMES`. ``auto`` is ``paper5`` for J = 5 and ``ring`` otherwise
    (a path for J = 2, one node for J = 1). ``grid`` is rows x cols with rows the largest
    divisor of J that is <= sqrt(J) (a prime J, 2 or 3 is refused: that would be a path).
    ``erdos-renyi`` uses edge
    probability ``edge_prob`` (default min(1, 2 ln J / J)) and, like ``random-regular``
    (degree ``degree``) and ``small-world`` (Watts-Strogatz, k = 4, or 2 when J < 6, rewiring
    p = 0.3), is redrawn from ``seed`` until connected. A file (``.edgelist``/``.txt`` "u v"
    lines, ``.adjlist``, ``.graphml``, ``.gml``, ``.json`` node-link) is read and validated
    against ``n_nodes``.
    The result is validated: connected, nodes 0..J-1, no self-loops.
    """
    if spec == "auto":
        spec = "paper5" if n_nodes == 5 else "ring"
    if spec in TOPOLOGY_NAMES:
        if n_nodes < 1:
            raise TopologyError(f"topology {spec!r} needs at least 1 node, got {n_nodes}")
        G = nx.Graph(_named(spec, n_nodes, seed, degree, edge_prob))
        name = spec
    else:
        G, name = _load_graph_file(spec), Path(spec).stem
    G = validate_topology(G, n_nodes)
    G.graph["name"] = name
    return G


def machine_count(spec: str, machines: int | None) -> int:
    """J of a job that is not given it by an MPI world: ``machines`` (--machines) if given,
    else the node count of the graph file ``spec``, else DEFAULT_MACHINES."""
    if machines is not None:
        return machines
    if spec in TOPOLOGY_NAMES:
        return DEFAULT_MACHINES
    return _load_graph_file(spec).number_of_nodes()


def _load_graph_file(spec: str) -> nx.Graph:
    path = Path(spec)
    if path.suffix.lower() not in _FILE_SUFFIXES:
        raise TopologyError(
            f"unknown topology {spec!r}: expected one of {', '.join(TOPOLOGY_NAMES)} "
            f"or a graph file ({', '.join(_FILE_SUFFIXES)})"
        )
    if not path.exists():
        raise TopologyError(f"graph file {spec} does not exist")
    if not path.is_file():
        raise TopologyError(f"graph file {spec} is not a regular file")
    return _read_graph_file(path)


def _as_node_int(node: Any) -> int:
    if isinstance(node, (bool, np.bool_)):
        raise ValueError(node)
    if isinstance(node, (int, np.integer)):
        return int(node)
    if isinstance(node, str) and node.strip().lstrip("-").isdigit():
        return int(node.strip())
    raise ValueError(node)


def validate_topology(G: nx.Graph, n_ranks: int) -> nx.Graph:
    """Return a clean copy of ``G`` (int nodes 0..J-1) or raise :class:`TopologyError`.

    Checks: undirected simple graph, node labels are integers (string integers from files are
    converted) forming exactly ``0..J-1``, no self-loops, connected, and J == ``n_ranks``.
    """
    if G.is_directed():
        raise TopologyError("graph is directed; machines exchange iterates both ways")
    if G.is_multigraph():
        G = nx.Graph(G)
    try:
        mapping = {v: _as_node_int(v) for v in G.nodes}
    except ValueError as exc:
        raise TopologyError(f"node label {exc.args[0]!r} is not an integer rank") from None
    if len(set(mapping.values())) != len(mapping):
        raise TopologyError("two node labels map to the same integer rank")
    J = G.number_of_nodes()
    if J == 0:
        raise TopologyError("graph has no nodes")
    if set(mapping.values()) != set(range(J)):
        bad = sorted(set(mapping.values()) - set(range(J)))
        raise TopologyError(f"graph nodes must be exactly 0..{J - 1}; found label(s) {bad[:5]}")
    loops = [u for u, v in nx.selfloop_edges(G)]
    if loops:
        raise TopologyError(
            f"graph has self-loop(s) at node(s) {sorted(mapping[u] for u in loops)}"
        )
    if J != n_ranks:
        raise TopologyError(f"graph has {J} nodes but {n_ranks} machines were requested")
    if not nx.is_connected(G):
        n_comp = nx.number_connected_components(G)
        raise TopologyError(f"graph is not connected ({n_comp} components)")
    clean = nx.Graph()
    clean.add_nodes_from(range(J))
    clean.add_edges_from((mapping[u], mapping[v]) for u, v in G.edges)
    clean.graph["name"] = G.graph.get("name", "graph")
    return clean


DENSE_SPECTRUM_MAX = 2000
"""Up to this many nodes the Laplacian's eigenvalues come from the dense symmetric solver
(0.1-0.3 s at 1,000 nodes); beyond, from sparse ones (dense: O(J^3) time, 8 J^2 bytes)."""

WELL_CONNECTED = 1e-2
"""mu_2 >= this times mu_J: mu_2 is taken as mu_J less the largest eigenvalue of mu_J I - L on
the complement of the constant vector (Lanczos, matrix-vector products only), whose
cancellation costs at most mu_J / mu_2 <= 100 times its 1e-13 accuracy; below, from
shift-invert Lanczos (a sparse LU of L + I, cheap on the rings, paths and grids that have so
small a mu_2, and 10 s on a random 3-regular graph of 10,000 nodes)."""

_SPECTRA: weakref.WeakKeyDictionary[nx.Graph, tuple[float, float]] = weakref.WeakKeyDictionary()
_SPECTRA_LOCK = threading.Lock()


def laplacian_extremes(graph: nx.Graph) -> tuple[float, float]:
    """(mu_2, mu_J): the algebraic connectivity and the largest eigenvalue of the Laplacian
    L = D - A ((0, 0) for one node), deterministic functions of the graph.

    Up to DENSE_SPECTRUM_MAX nodes: ``numpy.linalg.eigvalsh`` of the dense L. Beyond: mu_J by
    Lanczos (``eigsh``, largest algebraic), mu_2 by Lanczos on mu_J I - L deflated of the
    constant vector (0.2 s at J = 10,000 on a random 3-regular graph) or, on a graph with
    mu_2 < WELL_CONNECTED mu_J, by shift-invert Lanczos about sigma = -1 (L + I is positive
    definite), all from a fixed start vector, to ~1e-13 relative. Computed once per graph
    object and process: the machines of the thread backend share one graph (graphs are never
    changed after validation)."""
    with _SPECTRA_LOCK:
        if graph not in _SPECTRA:
            _SPECTRA[graph] = _extremes(graph)
        return _SPECTRA[graph]


def _extremes(graph: nx.Graph) -> tuple[float, float]:
    n = graph.number_of_nodes()
    if n < 2:
        return 0.0, 0.0
    laplacian = nx.laplacian_matrix(graph, nodelist=sorted(graph)).astype(np.float64)
    if n <= DENSE_SPECTRUM_MAX:
        mu = np.linalg.eigvalsh(laplacian.toarray())
        return float(mu[1]), float(mu[-1])
    from scipy.sparse import identity
    from scipy.sparse.linalg import LinearOperator, eigsh, splu

    start = np.linspace(1.0, 2.0, n)
    top = float(
        eigsh(laplacian, k=1, which="LA", v0=start, tol=1e-13, return_eigenvectors=False)[0]
    )

    def deflated(x: np.ndarray) -> np.ndarray:  # (mu_J I - L) on the complement of 1
        x = x - x.mean()
        y = top * x - laplacian @ x
        return y - y.mean()

    rest = eigsh(
        LinearOperator((n, n), matvec=deflated, dtype=np.float64),
        k=1,
        which="LA",
        v0=start - start.mean(),
        tol=1e-13,
        return_eigenvectors=False,
    )
    low = top - float(rest[0])
    if low >= WELL_CONNECTED * top:
        return low, top
    shifted = splu((laplacian + identity(n)).tocsc())
    inverse = LinearOperator((n, n), matvec=shifted.solve, dtype=np.float64)
    lows = eigsh(
        laplacian,
        k=2,
        sigma=-1.0,
        which="LM",
        OPinv=inverse,
        v0=start,
        tol=1e-13,
        return_eigenvectors=False,
    )
    return float(np.max(lows)), top


def algebraic_connectivity(G: nx.Graph) -> float:
    """Second-smallest eigenvalue mu_2 of the Laplacian L = D - A (:func:`laplacian_extremes`)."""
    return laplacian_extremes(G)[0]


def diameter(G: nx.Graph, chunk: int = 1024) -> int:
    """The longest shortest path of a connected graph: breadth-first searches from every node
    at once, ``chunk`` sources a pass, as bit sets (bit s of row v: v is within the levels so
    far of source s); a level ORs each node's neighbours' rows into its own (numpy's reduceat
    over the adjacency), and the diameter is the number of levels until every row is full.
    O(D |E| J / 64) word operations: 0.4 s at J = 10,000 (random 3-regular), where one BFS per
    source took 12 s."""
    from scipy.sparse import identity as sp_identity

    n = G.number_of_nodes()
    if n <= 1:
        return 0
    adjacency = nx.to_scipy_sparse_array(G, nodelist=range(n), format="csr")
    # each node's own row among its neighbours' (a level keeps what it reached)
    rows = (adjacency + sp_identity(n, format="csr")).tocsr()
    longest = 0
    for first in range(0, n, chunk):
        sources = np.arange(first, min(n, first + chunk))
        words = (sources.size + 63) // 64
        reach = np.zeros((n, words), dtype=np.uint64)
        bit = sources - first
        reach[sources, bit // 64] = np.left_shift(np.uint64(1), (bit % 64).astype(np.uint64))
        full = np.full(words, ~np.uint64(0))
        if sources.size % 64:
            full[-1] = (np.uint64(1) << np.uint64(sources.size % 64)) - np.uint64(1)
        levels = 0
        while not (reach == full).all():
            reach = np.bitwise_or.reduceat(reach[rows.indices], rows.indptr[:-1], axis=0)
            levels += 1
            if levels > n:
                raise ValueError("the graph is not connected")
        longest = max(longest, levels)
    return longest


def describe_topology(G: nx.Graph) -> dict[str, Any]:
    """JSON-ready summary: name, n_nodes, sorted edges, degrees, algebraic connectivity,
    diameter."""
    nodes = sorted(G.nodes)
    return {
        "name": G.graph.get("name", "graph"),
        "n_nodes": len(nodes),
        "edges": sorted([min(u, v), max(u, v)] for u, v in G.edges),
        "degrees": [int(G.degree(v)) for v in nodes],
        "algebraic_connectivity": algebraic_connectivity(G),
        "diameter": diameter(G) if nodes else 0,
    }


def neighbours(G: nx.Graph, node: int) -> list[int]:
    """Sorted neighbours of ``node`` (excluding itself)."""
    return sorted(int(v) for v in G.neighbors(node) if v != node)
