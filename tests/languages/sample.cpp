// An LRU cache with a fixed capacity.
#include <iostream>
#include <list>
#include <string>
#include <unordered_map>

template <typename Key, typename Value>
class LruCache {
public:
    explicit LruCache(std::size_t capacity) : capacity_(capacity) {}

    bool get(const Key& key, Value& out) {
        auto found = index_.find(key);
        if (found == index_.end()) {
            return false;
        }
        order_.splice(order_.begin(), order_, found->second);
        out = found->second->second;
        return true;
    }

    void put(const Key& key, const Value& value) {
        auto found = index_.find(key);
        if (found != index_.end()) {
            found->second->second = value;
            order_.splice(order_.begin(), order_, found->second);
            return;
        }
        if (order_.size() == capacity_) {
            index_.erase(order_.back().first);
            order_.pop_back();
        }
        order_.emplace_front(key, value);
        index_[key] = order_.begin();
    }

private:
    std::size_t capacity_;
    std::list<std::pair<Key, Value>> order_;
    std::unordered_map<Key, typename std::list<std::pair<Key, Value>>::iterator> index_;
};

class Report {
public:
    void line(const std::string& text) { std::cout << text << '\n'; }
};

float hit_rate(int hits, int total)
{
    return total == 0 ? 0.0f : static_cast<float>(hits) / total;
}

int main()
{
    LruCache<std::string, int> cache(2);
    Report report;
    int hits = 0, total = 0, value = 0;
    cache.put("a", 1);
    cache.put("b", 2);
    for (const char* key : {"a", "c", "b", "a"}) {
        total++;
        if (cache.get(key, value))
            hits++;
        else
            cache.put(key, 0);
    }
    while (total > 10)
        total--;
    report.line("hit rate " + std::to_string(hit_rate(hits, total)));
    return 0;
}
