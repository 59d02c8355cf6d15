defmodule Inventory do
  @moduledoc "An agent-backed inventory with reservations."
  use Agent

  def start_link(initial \\ %{}) do
    Agent.start_link(fn -> initial end, name: __MODULE__)
  end

  def receive_stock(sku, quantity) when quantity > 0 do
    Agent.update(__MODULE__, &Map.update(&1, sku, quantity, fn q -> q + quantity end))
  end

  def reserve(sku, quantity) do
    Agent.get_and_update(__MODULE__, fn stock ->
      available = Map.get(stock, sku, 0)
      if available >= quantity do
        {:ok, Map.put(stock, sku, available - quantity)}
      else
        {{:error, :insufficient}, stock}
      end
    end)
  end

  defp level(0), do: :empty
  defp level(n) when n < 3, do: :low
  defp level(_), do: :ok

  def report do
    for {sku, quantity} <- Agent.get(__MODULE__, & &1), into: %{} do
      {sku, level(quantity)}
    end
  end
end

defprotocol Describe do
  def describe(value)
end

defmacro unless_empty(list, do: block) do
  quote do
    unless unquote(list) == [], do: unquote(block)
  end
end

case Inventory.reserve("apple", 2) do
  :ok -> IO.puts("reserved")
  {:error, reason} -> IO.puts("failed: #{reason}")
end
cond do
  true -> IO.puts("done")
end
with {:ok, pid} <- Inventory.start_link() do
  IO.inspect(pid)
end
