#include "checkpoint/prefix_index.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cairn::checkpoint {

struct PrefixIndex::Node {
  std::vector<SymbolKey> edge;  // symbols from the parent to this node
  Node* parent = nullptr;
  size_t depth = 0;                                     // symbols from the root to this node
  std::map<SymbolKey, std::unique_ptr<Node>> children;  // by edge[0]
  std::vector<IndexEntry> entries;
};

PrefixIndex::PrefixIndex() = default;
PrefixIndex::~PrefixIndex() = default;

absl::StatusOr<std::unique_ptr<PrefixIndex>> PrefixIndex::Create() {
  return std::unique_ptr<PrefixIndex>(new PrefixIndex());
}

absl::Status PrefixIndex::Insert(std::string_view tenant, std::span<const SymbolKey> path, const IndexEntry& entry) {
  if (entry.id == 0) return absl::InvalidArgumentError("index entry id 0");
  absl::MutexLock lock(&mu_);
  if (where_.count(entry.id)) {
    return absl::AlreadyExistsError(absl::StrCat("index entry ", entry.id, " exists"));
  }
  auto root_it = roots_.find(tenant);
  if (root_it == roots_.end()) {
    root_it = roots_.emplace(std::string(tenant), std::make_unique<Node>()).first;
    ++nodes_;
  }
  Node* node = root_it->second.get();
  size_t i = 0;
  while (i < path.size()) {
    auto it = node->children.find(path[i]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(path.begin() + i, path.end());
      leaf->parent = node;
      leaf->depth = path.size();
      Node* raw = leaf.get();
      node->children.emplace(path[i], std::move(leaf));
      ++nodes_;
      node = raw;
      i = path.size();
      break;
    }
    Node* child = it->second.get();
    size_t k = CommonPrefix(child->edge, path.subspan(i));
    if (k < child->edge.size()) {
      // Split: a new node takes the shared part; the child keeps its object
      // (and entries) below it, so Where pointers stay valid.
      auto mid = std::make_unique<Node>();
      mid->edge.assign(child->edge.begin(), child->edge.begin() + k);
      mid->parent = node;
      mid->depth = node->depth + k;
      std::unique_ptr<Node> owned = std::move(it->second);
      owned->edge.erase(owned->edge.begin(), owned->edge.begin() + k);
      owned->parent = mid.get();
      mid->children.emplace(owned->edge[0], std::move(owned));
      Node* raw = mid.get();
      it->second = std::move(mid);
      ++nodes_;
      node = raw;
      i += k;
      continue;
    }
    node = child;
    i += k;
  }
  node->entries.push_back(entry);
  where_[entry.id] = Where{std::string(tenant), node};
  return absl::OkStatus();
}

void PrefixIndex::PruneLocked(Node* node) {
  while (node->parent != nullptr && node->entries.empty()) {
    Node* parent = node->parent;
    if (node->children.empty()) {
      parent->children.erase(node->edge[0]);
      --nodes_;
      node = parent;
      continue;
    }
    if (node->children.size() == 1) {
      // Merge the only child up: the child object survives (entries stay put).
      std::unique_ptr<Node> child = std::move(node->children.begin()->second);
      child->edge.insert(child->edge.begin(), node->edge.begin(), node->edge.end());
      child->parent = parent;
      SymbolKey first = node->edge[0];
      parent->children[first] = std::move(child);  // destroys `node`
      --nodes_;
    }
    return;
  }
}

namespace {
bool HoldsCheckpoint(const std::vector<IndexEntry>& entries) {
  return std::any_of(entries.begin(), entries.end(), [](const IndexEntry& e) { return e.kind != EntryKind::kLive; });
}
Pos CheckpointPos(const std::vector<IndexEntry>& entries) {
  for (const IndexEntry& e : entries) {
    if (e.kind != EntryKind::kLive) return e.pos;
  }
  return 0;
}
}  // namespace

bool PrefixIndex::Remove(uint64_t id, std::vector<Reparented>* reparented) {
  absl::MutexLock lock(&mu_);
  auto w = where_.find(id);
  if (w == where_.end()) return false;
  Node* node = w->second.node;
  std::string tenant = std::move(w->second.tenant);
  where_.erase(w);
  auto& entries = node->entries;
  bool was_checkpoint = false;
  for (const IndexEntry& e : entries) was_checkpoint |= e.id == id && e.kind != EntryKind::kLive;
  entries.erase(std::remove_if(entries.begin(), entries.end(), [id](const IndexEntry& e) { return e.id == id; }),
                entries.end());
  if (reparented != nullptr && was_checkpoint && !HoldsCheckpoint(entries)) {
    // The nearest checkpoint above, then every nearest one below.
    Pos parent_pos = 0;
    for (const Node* up = node->parent; up != nullptr; up = up->parent) {
      if (HoldsCheckpoint(up->entries)) {
        parent_pos = CheckpointPos(up->entries);
        break;
      }
    }
    std::vector<const Node*> stack;
    for (const auto& [key, child] : node->children) stack.push_back(child.get());
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!HoldsCheckpoint(n->entries)) {
        for (const auto& [key, child] : n->children) stack.push_back(child.get());
        continue;
      }
      for (const IndexEntry& e : n->entries) {
        if (e.kind != EntryKind::kLive) reparented->push_back({e.id, e.pos, parent_pos});
      }
    }
  }
  PruneLocked(node);
  auto root = roots_.find(tenant);
  if (root != roots_.end() && root->second->children.empty() && root->second->entries.empty()) {
    roots_.erase(root);
    --nodes_;
  }
  return true;
}

IndexMatch PrefixIndex::Lookup(std::string_view tenant, std::span<const SymbolKey> query, size_t max_below) const {
  IndexMatch match;
  absl::MutexLock lock(&mu_);
  auto root_it = roots_.find(tenant);
  if (root_it == roots_.end()) return match;
  const Node* node = root_it->second.get();
  size_t i = 0;
  // Subtrees whose entries share exactly `matched` symbols with the query.
  std::vector<const Node*> frontier;
  while (true) {
    for (const IndexEntry& e : node->entries) match.on_path.push_back({node->depth, e});
    auto it = i < query.size() ? node->children.find(query[i]) : node->children.end();
    if (it == node->children.end()) {
      match.matched = i;
      for (const auto& [key, child] : node->children) frontier.push_back(child.get());
      break;
    }
    const Node* child = it->second.get();
    size_t k = CommonPrefix(child->edge, query.subspan(i));
    if (k < child->edge.size()) {
      match.matched = i + k;
      frontier.push_back(child);
      break;
    }
    node = child;
    i += k;
  }
  // Breadth first: the shallowest bases are the cheapest to copy.
  std::deque<const Node*> queue(frontier.begin(), frontier.end());
  while (!queue.empty() && match.below.size() < max_below) {
    const Node* n = queue.front();
    queue.pop_front();
    for (const IndexEntry& e : n->entries) {
      if (e.kind == EntryKind::kCheckpoint) continue;  // useless off the query's path
      if (match.below.size() < max_below) match.below.push_back({n->depth, e});
    }
    for (const auto& [key, child] : n->children) queue.push_back(child.get());
  }
  return match;
}

int32_t PrefixIndex::Branches(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  auto w = where_.find(id);
  if (w == where_.end()) return -1;
  return static_cast<int32_t>(w->second.node->children.size());
}

size_t PrefixIndex::entries() const {
  absl::MutexLock lock(&mu_);
  return where_.size();
}

size_t PrefixIndex::nodes() const {
  absl::MutexLock lock(&mu_);
  return nodes_;
}

}  // namespace cairn::checkpoint
