// graph.cpp - a weighted directed graph with Dijkstra and topological sort.
#include <algorithm>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace graph {

using NodeId = std::size_t;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Edge {
    NodeId to;
    double weight;
};

enum class Color { White, Gray, Black };

class CycleError : public std::runtime_error {
public:
    explicit CycleError(NodeId at)
        : std::runtime_error("cycle through node " + std::to_string(at)), node(at) {}
    NodeId node;
};

/// A directed graph whose nodes carry labels of type T.
template <typename T>
class Graph {
public:
    NodeId add_node(T label) {
        labels_.push_back(std::move(label));
        adjacency_.emplace_back();
        return labels_.size() - 1;
    }

    void add_edge(NodeId from, NodeId to, double weight = 1.0);

    std::size_t size() const { return labels_.size(); }

    const T& label(NodeId id) const { return labels_.at(id); }

    std::optional<NodeId> find(const T& label) const {
        auto it = std::find(labels_.begin(), labels_.end(), label);
        if (it == labels_.end()) {
            return std::nullopt;
        }
        return static_cast<NodeId>(it - labels_.begin());
    }

    std::vector<double> shortest_paths(NodeId source) const;

    std::vector<NodeId> topological_order() const;

private:
    void visit(NodeId n, std::vector<Color>& color, std::vector<NodeId>& out) const;

    std::vector<T> labels_;
    std::vector<std::vector<Edge>> adjacency_;
};

template <typename T>
void Graph<T>::add_edge(NodeId from, NodeId to, double weight) {
    if (from >= size() || to >= size()) {
        throw std::out_of_range("add_edge: no such node");
    }
    if (weight < 0) {
        throw std::invalid_argument("add_edge: negative weight");
    }
    adjacency_[from].push_back(Edge{to, weight});
}

template <typename T>
std::vector<double> Graph<T>::shortest_paths(NodeId source) const {
    std::vector<double> dist(size(), kInfinity);
    using Item = std::pair<double, NodeId>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> frontier;
    dist.at(source) = 0;
    frontier.push({0, source});
    while (!frontier.empty()) {
        auto [d, n] = frontier.top();
        frontier.pop();
        if (d > dist[n]) {
            continue;
        }
        for (const Edge& e : adjacency_[n]) {
            double nd = d + e.weight;
            if (nd < dist[e.to]) {
                dist[e.to] = nd;
                frontier.push({nd, e.to});
            }
        }
    }
    return dist;
}

template <typename T>
void Graph<T>::visit(NodeId n, std::vector<Color>& color, std::vector<NodeId>& out) const {
    if (color[n] == Color::Black) {
        return;
    }
    if (color[n] == Color::Gray) {
        throw CycleError(n);
    }
    color[n] = Color::Gray;
    for (const Edge& e : adjacency_[n]) {
        visit(e.to, color, out);
    }
    color[n] = Color::Black;
    out.push_back(n);
}

template <typename T>
std::vector<NodeId> Graph<T>::topological_order() const {
    std::vector<Color> color(size(), Color::White);
    std::vector<NodeId> out;
    out.reserve(size());
    for (NodeId n = 0; n < size(); ++n) {
        visit(n, color, out);
    }
    std::reverse(out.begin(), out.end());
    return out;
}

}  // namespace graph

int main() {
    graph::Graph<std::string> g;
    auto a = g.add_node("a");
    auto b = g.add_node("b");
    auto c = g.add_node("c");
    g.add_edge(a, b, 2.0);
    g.add_edge(b, c, 1.5);
    g.add_edge(a, c, 5.0);
    auto dist = g.shortest_paths(a);
    auto order = g.topological_order();
    return dist[c] == 3.5 && order.front() == a ? 0 : 1;
}
