/** The world's rooms (its `.wam` files) on the overview: name, path, room URL and map, page by page. */
import { useInfiniteQuery } from "@tanstack/react-query";
import { Button, Empty, Loading, ProblemMessage } from "./ui.js";
import { useSession } from "../session-context.js";

export function RoomsCard() {
  const { api } = useSession();
  const rooms = useInfiniteQuery({
    queryKey: ["rooms"],
    queryFn: ({ pageParam }) => api.rooms(pageParam),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => last.nextCursor ?? undefined,
  });
  const items = rooms.data?.pages.flatMap((p) => p.items) ?? [];

  return (
    <section className="card" aria-labelledby="rooms-title">
      <h2 id="rooms-title">Rooms</h2>
      {rooms.isPending ? <Loading label="Loading the rooms…" /> : null}
      <ProblemMessage error={rooms.error} title="Could not load the rooms" />
      {rooms.data && items.length === 0 ? (
        <Empty>No rooms yet. A room exists once a .wam file is stored: publish a map with the command above.</Empty>
      ) : null}
      {items.length > 0 ? (
        <ul className="rows" aria-label="Rooms">
          {items.map((room) => {
            const name = typeof room.metadata?.["name"] === "string" && room.metadata["name"] !== "" ? room.metadata["name"] : room.path;
            return (
              <li key={room.path} className="row" data-testid="room-row">
                <div className="row-main">
                  <strong>{name}</strong> <span className="mono break">{room.path}</span>
                  <div className="meta">
                    <span>
                      Room URL:{" "}
                      <a className="mono break" href={room.roomUrl} target="_blank" rel="noopener noreferrer" data-testid="room-url">
                        {room.roomUrl}
                      </a>
                    </span>
                    <span>
                      Map: <span className="mono break">{room.mapUrl ?? "not readable as WAM"}</span>
                    </span>
                  </div>
                </div>
              </li>
            );
          })}
        </ul>
      ) : null}
      {rooms.hasNextPage ? (
        <Button busy={rooms.isFetchingNextPage} onClick={() => void rooms.fetchNextPage()}>
          More rooms
        </Button>
      ) : null}
    </section>
  );
}
