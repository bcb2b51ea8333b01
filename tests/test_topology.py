"""Topologies: named builders against graph-theory facts, graph files, validation errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import networkx as nx
import pytest

from dpnet.errors import TopologyError
from dpnet.network import (
    TOPOLOGY_NAMES,
    build_topology,
    describe_topology,
    neighbours,
    topology,
    validate_topology,
)

REPO = Path(__file__).resolve().parents[1]


def _edges(G: nx.Graph) -> list[list[int]]:
    return describe_topology(G)["edges"]


@pytest.mark.parametrize("J", [3, 5, 8, 13])
def test_ring_closed_forms(J: int) -> None:
    G = build_topology("ring", J)
    d = describe_topology(G)
    assert d["degrees"] == [2] * J
    assert len(d["edges"]) == J
    assert d["diameter"] == J // 2
    # Laplacian spectrum of the cycle C_J: 2 - 2 cos(2 pi k / J).
    assert d["algebraic_connectivity"] == pytest.approx(2 - 2 * math.cos(2 * math.pi / J))
    assert G.graph["name"] == "ring"


@pytest.mark.parametrize("J", [3, 5, 8])
def test_path_star_complete_closed_forms(J: int) -> None:
    path = describe_topology(build_topology("path", J))
    assert path["diameter"] == J - 1
    assert path["algebraic_connectivity"] == pytest.approx(2 - 2 * math.cos(math.pi / J))
    star = describe_topology(build_topology("star", J))
    assert star["degrees"][0] == J - 1 and star["degrees"][1:] == [1] * (J - 1)
    assert star["algebraic_connectivity"] == pytest.approx(1.0)
    comp = describe_topology(build_topology("complete", J))
    assert len(comp["edges"]) == J * (J - 1) // 2
    assert comp["algebraic_connectivity"] == pytest.approx(J)


@pytest.mark.parametrize(("J", "rows", "cols"), [(4, 2, 2), (8, 2, 4), (12, 3, 4), (1, 1, 1)])
def test_grid_shape(J: int, rows: int, cols: int) -> None:
    G = build_topology("grid", J)
    assert sorted(G.nodes) == list(range(J))
    assert nx.is_isomorphic(G, nx.grid_2d_graph(rows, cols))
    assert G.number_of_edges() == rows * (cols - 1) + cols * (rows - 1)


@pytest.mark.parametrize(("J", "nearest"), [(7, "6 or 8"), (2, "4"), (3, "4"), (97, "96 or 98")])
def test_a_grid_that_would_be_a_path_is_refused_naming_the_nearest_grids(J, nearest):
    with pytest.raises(TopologyError, match=f"1 x {J} path.*nearest: {nearest}"):
        build_topology("grid", J)


def test_paper5() -> None:
    G = build_topology("paper5", 5)
    d = describe_topology(G)
    assert d["edges"] == [[0, 1], [0, 2], [0, 4], [1, 2], [2, 3], [3, 4]]
    assert nx.is_connected(G) and G.number_of_edges() < 10
    with pytest.raises(TopologyError, match="'paper5' has 5 nodes, but 6"):
        build_topology("paper5", 6)


@pytest.mark.parametrize(("J", "degree"), [(8, 3), (10, 4), (5, 2)])
def test_random_regular(J: int, degree: int) -> None:
    G = build_topology("random-regular", J, seed=3, degree=degree)
    assert set(dict(G.degree).values()) == {degree}
    assert nx.is_connected(G)
    assert _edges(G) == _edges(build_topology("random-regular", J, seed=3, degree=degree))
    with pytest.raises(TopologyError, match="impossible"):
        build_topology("random-regular", 5, degree=3)


@pytest.mark.parametrize("name", ["random-regular", "erdos-renyi", "small-world"])
def test_random_families_seeded(name: str) -> None:
    J = 12
    draws = [_edges(build_topology(name, J, seed=s)) for s in range(4)]
    assert draws[0] == _edges(build_topology(name, J, seed=0))
    assert len({json.dumps(e) for e in draws}) > 1  # the seed matters
    for s in range(4):
        assert nx.is_connected(build_topology(name, J, seed=s))


def test_erdos_renyi_edge_prob() -> None:
    assert len(_edges(build_topology("erdos-renyi", 6, edge_prob=1.0))) == 15
    with pytest.raises(TopologyError, match="not in \\(0, 1\\]"):
        build_topology("erdos-renyi", 6, edge_prob=0.0)
    with pytest.raises(TopologyError, match="no connected graph in 100"):
        build_topology("erdos-renyi", 30, edge_prob=0.01)


def test_small_world_degrees() -> None:
    G = build_topology("small-world", 20, seed=1)
    assert G.number_of_edges() == 20 * 4 // 2  # rewiring keeps the edge count n k / 2


def test_every_name_builds_and_validates() -> None:
    for name in TOPOLOGY_NAMES:
        J = 5 if name == "paper5" else 8
        G = build_topology(name, J)
        assert validate_topology(G, J).number_of_nodes() == J
        assert G.graph["name"] == ("ring" if name == "auto" else name)  # auto names what it built


def test_neighbours_sorted() -> None:
    G = build_topology("star", 6)
    assert neighbours(G, 0) == [1, 2, 3, 4, 5]
    assert neighbours(G, 3) == [0]
    assert neighbours(build_topology("paper5", 5), 0) == [1, 2, 4]


def _write(G: nx.Graph, path: Path) -> None:
    suffix = path.suffix
    if suffix in (".edgelist", ".txt"):
        nx.write_edgelist(G, path, data=False)
    elif suffix == ".adjlist":
        nx.write_adjlist(G, path)
    elif suffix == ".graphml":
        nx.write_graphml(G, path)
    elif suffix == ".gml":
        nx.write_gml(G, path)
    else:
        path.write_text(json.dumps(nx.node_link_data(G, edges="links")))


@pytest.mark.parametrize("suffix", [".edgelist", ".txt", ".adjlist", ".graphml", ".gml", ".json"])
def test_graph_file_round_trip(tmp_path: Path, suffix: str) -> None:
    ref = build_topology("random-regular", 8, seed=5)
    path = tmp_path / f"mine{suffix}"
    _write(ref, path)
    G = build_topology(str(path), 8)
    assert _edges(G) == _edges(ref)
    assert all(isinstance(v, int) for v in G.nodes)
    assert G.graph["name"] == "mine"


def test_json_edges_key(tmp_path: Path) -> None:
    ref = build_topology("paper5", 5)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(nx.node_link_data(ref, edges="edges")))
    assert _edges(build_topology(str(path), 5)) == _edges(ref)


def test_string_labels_are_converted() -> None:
    G = nx.Graph([("0", "1"), ("1", "2")])
    clean = validate_topology(G, 3)
    assert sorted(clean.nodes) == [0, 1, 2] and _edges(clean) == [[0, 1], [1, 2]]


def test_validation_errors(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="^graph has 6 nodes but 5 machines were requested$"):
        validate_topology(nx.cycle_graph(6), 5)
    with pytest.raises(TopologyError, match="not connected \\(2 components\\)"):
        validate_topology(nx.Graph([(0, 1), (2, 3)]), 4)
    loop = nx.cycle_graph(4)
    loop.add_edge(2, 2)
    with pytest.raises(TopologyError, match="self-loop.*\\[2\\]"):
        validate_topology(loop, 4)
    with pytest.raises(TopologyError, match="exactly 0..2; found label\\(s\\) \\[3\\]"):
        validate_topology(nx.Graph([(1, 2), (2, 3)]), 3)
    with pytest.raises(TopologyError, match="node label 'a' is not an integer"):
        validate_topology(nx.Graph([("a", "b")]), 2)
    with pytest.raises(TopologyError, match="directed"):
        validate_topology(nx.DiGraph([(0, 1)]), 2)
    with pytest.raises(TopologyError, match="unknown topology 'torus'"):
        build_topology("torus", 5)
    with pytest.raises(TopologyError, match="does not exist"):
        build_topology(str(tmp_path / "absent.edgelist"), 5)
    bad = tmp_path / "bad.edgelist"
    bad.write_text("# comment\n0 1\n1 2 3\n")
    with pytest.raises(TopologyError, match="bad.edgelist: line 3: expected 'u v'"):
        build_topology(str(bad), 3)
    bad_gml = tmp_path / "bad.gml"
    bad_gml.write_text("graph [ node [ id 0\n")
    with pytest.raises(TopologyError, match="cannot read graph file .*bad.gml"):
        build_topology(str(bad_gml), 1)
    bad_xml = tmp_path / "bad.graphml"
    bad_xml.write_text("<graphml><oops")
    with pytest.raises(TopologyError, match="cannot read graph file"):
        build_topology(str(bad_xml), 1)


def test_algebraic_connectivity_matches_networkx() -> None:
    G = build_topology("erdos-renyi", 15, seed=2)
    ref = nx.algebraic_connectivity(G, method="tracemin_lu", tol=1e-12, seed=0)
    assert describe_topology(G)["algebraic_connectivity"] == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("spec", ["random-regular", "small-world", "ring", "grid"])
def test_sparse_laplacian_extremes_equal_the_dense_ones(monkeypatch, spec) -> None:
    """Beyond DENSE_SPECTRUM_MAX nodes mu_2 and mu_J come from sparse Lanczos; on a graph
    small enough for both they agree with the dense solver to 1e-11."""
    G = build_topology(spec, 300, seed=1)
    dense = topology._extremes(G)
    monkeypatch.setattr(topology, "DENSE_SPECTRUM_MAX", 10)
    sparse = topology._extremes(G)
    assert sparse == pytest.approx(dense, rel=1e-11, abs=1e-12)
    assert dense[0] == pytest.approx(nx.algebraic_connectivity(G, tol=1e-12, seed=0), rel=1e-8)


@pytest.mark.parametrize("spec", ["random-regular", "path", "star", "grid", "erdos-renyi"])
def test_diameter_matches_networkx(spec) -> None:
    G = build_topology(spec, 60, seed=3)
    assert topology.diameter(G, chunk=7) == nx.diameter(G)


def test_shipped_topology_files() -> None:
    files = sorted((REPO / "topologies").glob("*.edgelist"))
    assert files, "topologies/ holds no .edgelist files"
    for path in files:
        J = int(path.stem.rsplit("-", 1)[1].lstrip("J"))
        G = build_topology(str(path), J)
        name = path.stem.rsplit("-", 1)[0]
        seed_kw = {"degree": 2} if (name == "random-regular" and J == 5) else {}
        assert _edges(G) == _edges(build_topology(name, J, **seed_kw)), path.name


@pytest.mark.parametrize(
    ("J", "name", "edges"),
    [(1, "ring", 0), (2, "ring", 1), (5, "paper5", 6), (8, "ring", 8), (1000, "ring", 1000)],
)
def test_auto_topology_serves_any_machine_count(J, name, edges) -> None:
    G = build_topology("auto", J)
    assert G.graph["name"] == name and G.number_of_nodes() == J
    assert G.number_of_edges() == edges and nx.is_connected(G)
