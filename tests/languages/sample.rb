# A tiny key-value store persisted as JSON.
require 'json'

class Store
  attr_reader :path

  def initialize(path)
    @path = path
    @data = File.exist?(path) ? JSON.parse(File.read(path)) : {}
  end

  def [](key)
    @data[key.to_s]
  end

  def []=(key, value)
    @data[key.to_s] = value
    save
  end

  def delete(key)
    @data.delete(key.to_s).tap { save }
  end

  private

  def save
    File.write(path, JSON.pretty_generate(@data))
  end
end

def with_retries(times)
  attempt = 0
  begin
    attempt += 1
    yield attempt
  rescue IOError => e
    retry if attempt < times
    raise e
  end
end

store = Store.new('/tmp/store.json')
store[:visits] = (store[:visits] || 0) + 1
if store[:visits] > 10
  puts 'regular visitor'
end
unless store[:name]
  store[:name] = 'guest'
end
while store[:visits] > 100
  store[:visits] -= 100
end
for key in %w[visits name]
  puts "#{key}: #{store[key]}"
end
[1, 2, 3].each do |n|
  with_retries(2) { |attempt| puts "#{n} on attempt #{attempt}" }
end
